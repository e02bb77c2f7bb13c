//! The two barriers of the doorbell protocol.
//!
//! Volatile accesses are ordered among themselves, but not with the ordinary
//! stores that fill a descriptor in DDR: on arm a device can observe the
//! doorbell before the descriptor unless a barrier separates them. These are
//! the barriers Linux's `writel()` and `readl()` carry (`__iowmb`/`__iormb`).

/// Orders every earlier store to normal memory (descriptors, prompts) before
/// any later store to device memory (the doorbell).
#[inline]
pub fn io_wmb() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dmb oshst` only orders stores; it touches no memory or
    // register that Rust knows about.
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags));
    }
    #[cfg(target_arch = "arm")]
    // SAFETY: `dsb st` only waits for earlier stores to complete.
    unsafe {
        core::arch::asm!("dsb st", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "aarch64", target_arch = "arm")))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Orders an earlier load from device memory (a ring index) before every
/// later load from normal memory (the entries it announces).
#[inline]
pub fn io_rmb() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dmb oshld` only orders loads.
    unsafe {
        core::arch::asm!("dmb oshld", options(nostack, preserves_flags));
    }
    #[cfg(target_arch = "arm")]
    // SAFETY: `dsb sy` only waits for earlier accesses to complete (ARMv7 has
    // no load-only variant).
    unsafe {
        core::arch::asm!("dsb sy", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "aarch64", target_arch = "arm")))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}
