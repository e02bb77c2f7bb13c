//! Gives freed memory back to the system once load has gone.
//!
//! glibc's malloc keeps the pages of freed blocks for the next allocation,
//! and returns to the system only what is free at the top of the heap. So
//! after ten thousand connections close, or a burst of requests ends, the
//! daemon would keep their memory until the next burst: on a 512 MiB
//! board, memory no other process can have. `malloc_trim(0)` gives back
//! every whole free page in the heap (inside it too, since glibc 2.8). It
//! holds the arena's lock while it walks the heap, so it runs when load
//! has fallen, not on every tick.
//!
//! The trim runs on the runtime's own thread, not on a blocking thread:
//! malloc is kept to one arena ([`tune_malloc`]), so while the walk holds
//! its lock any thread's next allocation that its thread cache cannot
//! serve waits for the walk wherever it runs, and a blocking thread bought
//! the serving thread little. It cost a thread, though: tokio keeps an
//! idle blocking thread 10 s, and while HAProxy closes its pooled
//! connections a few at a time the trims come a few seconds apart, so the
//! board held a thread more than its idle baseline for as long as its
//! load went on falling. A walk is well under a millisecond at the heaps
//! the soak sees (docs/design.md), at most twice for each fall of a
//! quarter.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often load is looked at.
const EVERY: Duration = Duration::from_secs(1);

/// Load that must have gone since the last trim (connections and requests
/// together) before another: a quarter of the peak, and at least this.
const FALL: u64 = 64;

/// Ticks after a trim before a second one, if load has not risen since:
/// what ends a little after the rest (a refusal's lingering close, a
/// blocking thread's work) is freed by then.
const AGAIN_AFTER: u32 = 5;

/// When to trim: load has fallen by a quarter of its peak since the last
/// trim, and by at least [`FALL`]; and once more a few seconds later if it
/// has stayed down.
#[derive(Debug, Default)]
pub struct Watch {
    peak: u64,
    /// Ticks to the second trim, and the load it was set at.
    again: Option<(u32, u64)>,
}

impl Watch {
    /// Takes the load now (one tick); true if memory should be given back.
    pub fn look(&mut self, load: u64) -> bool {
        if let Some((ticks, at)) = self.again {
            if load > at {
                self.again = None;
            } else if ticks <= 1 {
                self.again = None;
                return true;
            } else {
                self.again = Some((ticks - 1, at));
            }
        }
        if load >= self.peak {
            self.peak = load;
            return false;
        }
        let trim = self.peak - load >= FALL && load * 4 <= self.peak * 3;
        if trim {
            self.peak = load;
            self.again = Some((AGAIN_AFTER, load));
        }
        trim
    }
}

/// Trims when [`Watch`] says so, until `stop` fires; `load` is the
/// connections open and the requests admitted.
pub async fn give_back(load: impl Fn() -> u64, stop: CancellationToken) {
    let mut watch = Watch::default();
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        if watch.look(load()) {
            trim();
        }
    }
}

/// malloc's two settings for a daemon on a board's little memory.
///
/// One arena for every thread. glibc gives a thread that finds an arena's
/// lock taken an arena of its own (up to eight a core), where what threads
/// that then sleep (blocking work, the simulator's) freed can stay;
/// docs/design.md's design notes say what was measured. The daemon serves
/// from one thread, so the one lock is seldom contended.
///
/// Blocks of a megabyte and more mapped on their own, so that freeing one
/// gives it back at once. Those are a load's tables and images, read whole
/// and freed within the load. glibc otherwise raises this threshold to the
/// size of each such block freed (up to 32 MiB), and the next table then
/// comes from the heap, whose freed pages stay until a trim: the daemon
/// held 8 MiB of the start-up's tables at idle so
/// (results/ab-2026-12-08.md). A request's blocks are far smaller.
///
/// Called before the runtime and the simulator start their threads. An
/// operator's own `glibc.malloc.arena_max` or `glibc.malloc.mmap_threshold`
/// (in `GLIBC_TUNABLES`) is left as it is.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn tune_malloc() {
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if !tunables.contains("glibc.malloc.arena_max") {
        // SAFETY: mallopt takes two integers and changes only malloc's
        // settings; glibc locks what it changes.
        if unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) } != 1 {
            log::warn!("serve: could not limit malloc to one arena");
        }
    }
    if !tunables.contains("glibc.malloc.mmap_threshold") {
        // SAFETY: as above.
        if unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MAPPED_FROM) } != 1 {
            log::warn!("serve: could not set malloc's mmap threshold");
        }
    }
}

/// The size from which a block is mapped on its own ([`tune_malloc`]).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MAPPED_FROM: libc::c_int = 1 << 20;

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn tune_malloc() {}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn trim() {
    let start = std::time::Instant::now();
    // SAFETY: malloc_trim takes no pointers and is thread-safe (it locks
    // each arena it walks); 0 asks it to keep no padding at the top.
    let released = unsafe { libc::malloc_trim(0) };
    log::debug!(
        "serve: gave free memory back to the system ({released}) in {} µs",
        start.elapsed().as_micros()
    );
}

/// Other C libraries (musl) have no `malloc_trim`; their allocators give
/// memory back as they see fit.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_once_load_has_fallen_by_a_quarter_and_not_while_it_climbs() {
        let mut w = Watch::default();
        for load in [0, 10, 1000, 12_000] {
            assert!(!w.look(load), "climbing at {load}");
        }
        // A dip of less than a quarter: no.
        assert!(!w.look(10_000));
        // Past a quarter: once, and the fallen load is the new peak.
        assert!(w.look(8_000));
        // Load rises again before the second trim is due: none.
        assert!(!w.look(8_500));
        assert!(w.look(0));
        // Load stays down: a second trim, AGAIN_AFTER ticks later, once.
        let later: Vec<bool> = (0..AGAIN_AFTER + 3).map(|_| w.look(0)).collect();
        let mut want = vec![false; later.len()];
        want[AGAIN_AFTER as usize - 1] = true;
        assert_eq!(later, want);
        // Small loads never trim: at most FALL has gone.
        assert!(!w.look(FALL - 1));
        assert!(!w.look(0));
    }

    /// A trim starts no thread: one would outlive it by tokio's keep-alive
    /// (10 s), a thread more than the idle board's while load falls.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_trim_runs_on_the_runtimes_thread() {
        const NAME: &str = "trim-test-pool";
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .thread_name(NAME)
            .build()
            .expect("a runtime");
        let stop = CancellationToken::new();
        let looks = std::sync::atomic::AtomicU32::new(0);
        // A burst, then nothing: a trim at the fall and one AGAIN_AFTER
        // ticks later; then the watch stops.
        let load = || {
            let n = looks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if n > AGAIN_AFTER + 2 {
                stop.cancel();
            }
            if n == 0 {
                10_000
            } else {
                0
            }
        };
        runtime.block_on(give_back(load, stop.clone()));
        assert!(looks.into_inner() > AGAIN_AFTER + 2);
        let names: Vec<String> = std::fs::read_dir("/proc/self/task")
            .expect("/proc/self/task")
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .map(|c| c.trim_end().to_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n == NAME),
            "a thread of the runtime's blocking pool: {names:?}"
        );
    }
}
