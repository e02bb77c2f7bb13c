// SPDX-License-Identifier: MIT OR Apache-2.0
//
// The C interface of the Verilated fabric (rtl/sim/fabric_cosim.v), after
// chipsalliance/caliptra-sw's hw/verilated: an opaque handle, plain calls,
// the clock stepped a cycle at a time. firmware/fabric-rtl links it.
//
// Every register access is an AXI4-Lite transaction on the port's
// channels, clocked until its response; the shell's AXI4 master is
// answered by a DDR model here that reads and writes the host's memory
// through a callback (a decode error for an address outside it), after a
// fixed read latency. Each slot's engine reads (and a transformer writes
// its keys and values) through a port of its own, 64 bits wide, answered
// by a model of an HP port that keeps several bursts outstanding, each
// after a latency, and may be told to stall its ARREADY, AWREADY and
// WREADY and put gaps between its beats and responses at random (a seeded
// generator, so a run repeats): the engine must keep AXI's rules whatever
// the port does.

#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

#include "Vfabric_cosim.h"
#include "verilated.h"
#include "breaks.h"
#ifdef FCS_TRACE
#include "verilated_vcd_c.h"
#endif

extern "C" {

// Reads (write = 0) or writes one 32-bit word of DDR at a physical
// address; returns 0, or non-zero for an address outside the memory.
typedef int (*fcs_mem_fn)(void* ctx, uint64_t addr, uint32_t* word, int write);

// Slots rtl/sim/fabric_cosim.v is built with (its SLOTS).
static const unsigned SLOTS = 2;

// An engine's HP port: bursts asked for queue, each answered after the
// latency, in order; a beat offered stays offered until taken (AXI's rule).
// Beats are 8 bytes, at addresses aligned down to 8 (a burst's first beat
// holds the bytes below its address too). Writes are single beats: each
// address taken waits for its beat, then answers after the latency, in
// order.
struct rd_port {
    struct burst {
        uint64_t addr;
        unsigned left;
        uint64_t due;
    };
    struct write {
        uint64_t addr;
        bool data;      // its beat has been taken
        int err;
        uint64_t due;
    };
    std::deque<burst> q;
    std::deque<write> wq;
    uint64_t beats;     // read beats taken since power-on: the engine's traffic
    uint64_t writes;    // write beats taken since power-on
    bool offered;       // RVALID was high and not taken
    bool b_offered;     // BVALID was high and not taken
    bool arready;
    bool rvalid;
    uint64_t rdata;
    unsigned rresp;
    bool rlast;
    bool awready;
    bool wready;
    bool bvalid;
    unsigned bresp;
};

struct fcs {
    VerilatedContext* context;
    Vfabric_cosim* top;
    uint64_t cycles;
    fcs_mem_fn mem;
    void* mem_ctx;
    unsigned read_latency;
    // The DDR model's state.
    bool reading;
    uint64_t r_addr;
    unsigned r_left;
    unsigned r_wait;
    bool writing;
    uint64_t w_addr;
    bool w_resp;
    int w_err;
    bool b_pending;
    // Steps each slot may still take; negative: no limit.
    int64_t credits[8];
    // The engines' ports: how each answers.
    rd_port ports[SLOTS];
    unsigned port_latency;
    unsigned port_depth;
    unsigned stall_permille;
    uint64_t rng;
#ifdef FCS_TRACE
    VerilatedVcdC* vcd;
#endif
    std::string trace_path;
};

// xorshift64*: the ports' stalls, repeatable from the seed.
static unsigned roll(fcs* f) {
    f->rng ^= f->rng >> 12;
    f->rng ^= f->rng << 25;
    f->rng ^= f->rng >> 27;
    return static_cast<unsigned>(((f->rng * 0x2545F4914F6CDD1DULL) >> 32) % 1000);
}

// With stalls on (fcs_set_ports): whether a channel stalls this cycle.
static bool stalled(fcs* f) { return f->stall_permille > 0 && roll(f) < f->stall_permille; }

// A burst's latency: with stalls on, one of its own, up to half as long
// again as `latency`.
static uint64_t burst_latency(fcs* f, unsigned latency) {
    return latency + (f->stall_permille > 0 ? roll(f) * (latency / 2 + 1) / 1000 : 0);
}

// Bits [lo, lo + n) of a wide Verilated port's words (e_araddr: 40 bits
// a slot).
static uint64_t bits(const WData* w, unsigned lo, unsigned n) {
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned b = lo + i;
        v |= static_cast<uint64_t>((w[b / 32] >> (b % 32)) & 1u) << i;
    }
    return v;
}

// Reads the 8 bytes at `addr` (aligned down to 8); non-zero for an address
// outside the memory.
static int read_beat(fcs* f, uint64_t addr, uint64_t* beat);
// Writes the bytes of `beat` that `strb` enables at `addr` (aligned down
// to 8), a word at a time: read, merged, written back.
static int write_beat(fcs* f, uint64_t addr, uint64_t beat, unsigned strb);

static int read_beat(fcs* f, uint64_t addr, uint64_t* beat) {
    uint64_t base = addr & ~7ULL;
    uint32_t lo = 0, hi = 0;
    int err = f->mem ? f->mem(f->mem_ctx, base, &lo, 0) | f->mem(f->mem_ctx, base + 4, &hi, 0) : 1;
    *beat = static_cast<uint64_t>(hi) << 32 | lo;
    return err;
}

static int write_beat(fcs* f, uint64_t addr, uint64_t beat, unsigned strb) {
    uint64_t base = addr & ~7ULL;
    if (!f->mem) return 1;
    int err = 0;
    for (unsigned half = 0; half < 2; half++) {
        unsigned s4 = (strb >> (4 * half)) & 0xF;
        if (s4 == 0) continue;
        uint32_t word = 0, data = static_cast<uint32_t>(beat >> (32 * half));
        if (s4 != 0xF && f->mem(f->mem_ctx, base + 4 * half, &word, 0)) err = 1;
        for (unsigned b = 0; b < 4; b++)
            if ((s4 >> b) & 1) word = (word & ~(0xFFu << (8 * b))) | (data & (0xFFu << (8 * b)));
        if (f->mem(f->mem_ctx, base + 4 * half, &word, 1)) err = 1;
    }
    return err;
}

// The engines' ports' outputs for this cycle.
static void drive_ports(fcs* f) {
    Vfabric_cosim* t = f->top;
    unsigned arready = 0, rvalid = 0, rlast = 0, rresp = 0;
    unsigned awready = 0, wready = 0, bvalid = 0, bresp = 0;
    for (unsigned s = 0; s < SLOTS; s++) {
        rd_port& p = f->ports[s];
        p.arready = p.q.size() < f->port_depth && roll(f) >= f->stall_permille;
        bool due = !p.q.empty() && p.q.front().due <= f->cycles;
        p.rvalid = due && (p.offered || roll(f) >= f->stall_permille);
        if (p.rvalid) {
            uint64_t beat = 0;
            int err = read_beat(f, p.q.front().addr, &beat);
            p.rdata = beat;
            p.rresp = err ? 3 : 0;
            p.rlast = p.q.front().left == 1;
        } else {
            p.rdata = 0;
            p.rresp = 0;
            p.rlast = false;
        }
        p.awready = p.wq.size() < f->port_depth && roll(f) >= f->stall_permille;
        bool want_w = false;
        for (const rd_port::write& w : p.wq) want_w = want_w || !w.data;
        p.wready = want_w && roll(f) >= f->stall_permille;
        bool b_due = !p.wq.empty() && p.wq.front().data && p.wq.front().due <= f->cycles;
        p.bvalid = b_due && (p.b_offered || roll(f) >= f->stall_permille);
        p.bresp = p.bvalid && p.wq.front().err ? 3 : 0;
        arready |= static_cast<unsigned>(p.arready) << s;
        rvalid |= static_cast<unsigned>(p.rvalid) << s;
        rlast |= static_cast<unsigned>(p.rlast) << s;
        rresp |= p.rresp << (2 * s);
        t->e_rdata[2 * s] = static_cast<uint32_t>(p.rdata);
        t->e_rdata[2 * s + 1] = static_cast<uint32_t>(p.rdata >> 32);
        awready |= static_cast<unsigned>(p.awready) << s;
        wready |= static_cast<unsigned>(p.wready) << s;
        bvalid |= static_cast<unsigned>(p.bvalid) << s;
        bresp |= p.bresp << (2 * s);
    }
    t->e_arready = arready;
    t->e_rvalid = rvalid;
    t->e_rlast = rlast;
    t->e_rresp = rresp;
    t->e_awready = awready;
    t->e_wready = wready;
    t->e_bvalid = bvalid;
    t->e_bresp = bresp;
}

// What the engines asked for and took, sampled before the edge.
struct port_sample {
    bool ar[SLOTS];
    uint64_t araddr[SLOTS];
    unsigned arlen[SLOTS];
    bool r[SLOTS];
    bool aw[SLOTS];
    uint64_t awaddr[SLOTS];
    bool w[SLOTS];
    uint64_t wdata[SLOTS];
    unsigned wstrb[SLOTS];
    bool b[SLOTS];
};

static port_sample sample_ports(fcs* f) {
    Vfabric_cosim* t = f->top;
    port_sample p{};
    for (unsigned s = 0; s < SLOTS; s++) {
        p.ar[s] = ((t->e_arvalid >> s) & 1) && f->ports[s].arready;
        p.araddr[s] = bits(t->e_araddr.data(), 40 * s, 40);
        p.arlen[s] = (t->e_arlen >> (8 * s)) & 0xFF;
        p.r[s] = f->ports[s].rvalid && ((t->e_rready >> s) & 1);
        p.aw[s] = ((t->e_awvalid >> s) & 1) && f->ports[s].awready;
        p.awaddr[s] = bits(t->e_awaddr.data(), 40 * s, 40);
        p.w[s] = ((t->e_wvalid >> s) & 1) && f->ports[s].wready;
        p.wdata[s] = bits(t->e_wdata.data(), 64 * s, 64);
        p.wstrb[s] = (t->e_wstrb >> (8 * s)) & 0xFF;
        p.b[s] = f->ports[s].bvalid && ((t->e_bready >> s) & 1);
    }
    return p;
}

static void advance_ports(fcs* f, const port_sample& p) {
    for (unsigned s = 0; s < SLOTS; s++) {
        rd_port& port = f->ports[s];
        port.offered = port.rvalid && !p.r[s];
        port.b_offered = port.bvalid && !p.b[s];
        if (p.r[s]) {
            port.beats++;
            port.q.front().addr = (port.q.front().addr & ~7ULL) + 8;
            if (--port.q.front().left == 0) port.q.pop_front();
        }
        if (p.ar[s]) {
            // Bursts answer in order, whatever their latencies.
            uint64_t due = f->cycles + burst_latency(f, f->port_latency);
            if (!port.q.empty() && port.q.back().due > due) due = port.q.back().due;
            port.q.push_back({p.araddr[s], p.arlen[s] + 1, due});
        }
        if (p.b[s]) port.wq.pop_front();
        if (p.w[s]) {
            // The beat is the first address's still waiting for one.
            for (rd_port::write& w : port.wq) {
                if (w.data) continue;
                w.data = true;
                w.err = write_beat(f, w.addr, p.wdata[s], p.wstrb[s]);
                uint64_t due = f->cycles + burst_latency(f, f->port_latency / 4);
                w.due = due;
                port.writes++;
                break;
            }
        }
        if (p.aw[s]) port.wq.push_back({p.awaddr[s], false, 0, 0});
    }
}

static void half(fcs* f, int clk) {
    f->top->clk = clk;
    f->top->eval();
#ifdef FCS_TRACE
    if (f->vcd) f->vcd->dump(2 * f->cycles + (clk ? 1 : 0));
#endif
}

// The DDR side of one cycle: drives the slave's outputs for this cycle from
// the state, then clocks, then takes what was handshaken.
static void cycle(fcs* f) {
    Vfabric_cosim* t = f->top;
    // In reset the DDR model starts afresh and takes nothing: a master's
    // VALIDs mean nothing until reset ends (AMBA AXI, A3.1.2), and built
    // with --x-initial unique they are random before the first edge.
    bool in_reset = t->rst;
    if (in_reset) {
        f->reading = f->writing = f->b_pending = false;
        f->w_err = 0;
        for (rd_port& port : f->ports) {
            port.q.clear();
            port.wq.clear();
            port.offered = port.b_offered = false;
        }
    }
    // Outputs of the DDR model for this cycle.
    // With stalls on (fcs_set_ports), every channel of the shell's port too
    // holds its READY low, and its beats and responses back, at random;
    // a VALID once raised holds until taken (the shell's master takes R
    // and B at once: its RREADY and BREADY are tied high).
    t->m_arready = !f->reading && !stalled(f);
    t->m_rvalid = f->reading && f->r_wait == 0 && !stalled(f);
    if (t->m_rvalid) {
        uint32_t word = 0;
        int err = f->mem ? f->mem(f->mem_ctx, f->r_addr, &word, 0) : 1;
        t->m_rdata = word;
        t->m_rresp = err ? 3 : 0;
        t->m_rlast = f->r_left == 1;
    } else {
        t->m_rdata = 0;
        t->m_rresp = 0;
        t->m_rlast = 0;
    }
    unsigned gate = 0;
    for (unsigned s = 0; s < 8; s++)
        if (f->credits[s] != 0) gate |= 1u << s;
    t->step_gate = gate;
    t->m_awready = !f->writing && !f->b_pending && !stalled(f);
    t->m_wready = f->writing && !stalled(f);
    t->m_bvalid = f->b_pending && !stalled(f);
    t->m_bresp = f->w_err ? 3 : 0;
    drive_ports(f);
    if (in_reset) {
        t->m_arready = t->m_awready = t->m_wready = 0;
        t->e_arready = t->e_awready = t->e_wready = 0;
        for (rd_port& port : f->ports) port.arready = port.awready = port.wready = false;
    }
    half(f, 0);
    port_sample ports = sample_ports(f);
    // Sample the master's requests before the edge.
    bool ar = t->m_arvalid && t->m_arready;
    uint64_t araddr = t->m_araddr;
    unsigned arlen = t->m_arlen;
    bool r = t->m_rvalid;  // the master always takes R
    bool aw = t->m_awvalid && t->m_awready;
    uint64_t awaddr = t->m_awaddr;
    bool w = t->m_wvalid && t->m_wready;
    uint32_t wdata = t->m_wdata;
    bool wlast = t->m_wlast;
    bool b = t->m_bvalid;  // the master always takes B
    unsigned taken = t->step_taken;
    half(f, 1);
    for (unsigned s = 0; s < 8; s++)
        if ((taken >> s) & 1 && f->credits[s] > 0) f->credits[s]--;
    f->cycles++;
    advance_ports(f, ports);
    if (f->reading && f->r_wait > 0) f->r_wait--;
    if (r) {
        f->r_addr += 4;
        if (--f->r_left == 0) f->reading = false;
    }
    if (ar) {
        f->reading = true;
        f->r_addr = araddr;
        f->r_left = arlen + 1;
        f->r_wait = burst_latency(f, f->read_latency);
    }
    if (b) {
        f->b_pending = false;
        f->w_err = 0;
    }
    if (aw) {
        f->writing = true;
        f->w_addr = awaddr;
        f->w_err = 0;
    }
    if (w) {
        uint32_t word = wdata;
        if (!f->mem || f->mem(f->mem_ctx, f->w_addr, &word, 1)) f->w_err = 1;
        f->w_addr += 4;
        if (wlast) {
            f->writing = false;
            f->b_pending = true;
        }
    }
}

fcs* fcs_new(unsigned read_latency) {
    static unsigned serial = 0;
    fcs* f = new fcs();
    f->context = new VerilatedContext();
#ifdef FCS_X_UNIQUE
    // Every register and memory from a random value (the model was built
    // with --x-initial unique); FABRIC_RTL_SEED repeats a run.
    const char* seed = std::getenv("FABRIC_RTL_SEED");
    f->context->randReset(2);
    f->context->randSeed(seed ? std::atoi(seed) : static_cast<int>(1 + serial));
#endif
#ifdef FCS_TRACE
    f->context->traceEverOn(true);
#endif
    fabric_breaks(f->context);
    f->top = new Vfabric_cosim(f->context, "fabric");
#ifdef FCS_TRACE
    // A waveform of every signal, when FABRIC_RTL_TRACE names a directory
    // (made if missing); one that cannot be written is said so, not lost.
    const char* dir = std::getenv("FABRIC_RTL_TRACE");
    if (dir && *dir) {
        char name[64];
        std::snprintf(name, sizeof name, "/cosim-%d-%u.vcd", static_cast<int>(getpid()), serial);
        std::error_code made;
        std::filesystem::create_directories(dir, made);
        std::string path = std::string(dir) + name;
        f->vcd = new VerilatedVcdC();
        f->top->trace(f->vcd, 99);
        f->vcd->open(path.c_str());
        if (f->vcd->isOpen()) {
            f->trace_path = path;
        } else {
            std::fprintf(stderr, "fabric-rtl: cannot write the waveform %s\n", path.c_str());
            delete f->vcd;
            f->vcd = nullptr;
        }
    }
#endif
    serial++;
    f->read_latency = read_latency;
    f->port_latency = read_latency;
    f->port_depth = 4;
    f->stall_permille = 0;
    f->rng = 0x9E3779B97F4A7C15ULL;
    for (unsigned s = 0; s < 8; s++) f->credits[s] = -1;
    // The host's side starts idle: the model's inputs are no registers the
    // design resets, and built with --x-initial unique they start random.
    f->top->s_awvalid = 0;
    f->top->s_wvalid = 0;
    f->top->s_bready = 0;
    f->top->s_arvalid = 0;
    f->top->s_rready = 0;
    f->top->pr_active = 0;
    f->top->lm_module = 0;
    // Power-on with no module in any slot: greyboxes.
    f->top->greybox = ~0u;
    f->top->rst = 1;
    for (int i = 0; i < 8; i++) cycle(f);
    f->top->rst = 0;
    cycle(f);
    return f;
}

// The waveform's file ("" when none is written).
const char* fcs_trace_path(const fcs* f) { return f->trace_path.c_str(); }

void fcs_free(fcs* f) {
    if (!f) return;
#ifdef FCS_TRACE
    if (f->vcd) {
        f->vcd->close();
        delete f->vcd;
    }
#endif
    f->top->final();
    delete f->top;
    delete f->context;
    delete f;
}

void fcs_set_mem(fcs* f, fcs_mem_fn mem, void* ctx) {
    f->mem = mem;
    f->mem_ctx = ctx;
}

// How the engines' ports answer: each burst after `latency` cycles, up to
// `depth` outstanding, and ARREADY low and RVALID withheld each with
// probability stall_permille / 1000 a cycle, from `seed`; with stalls, each
// burst's latency up to half as long again, and the shell's port stalls
// every channel the same way.
void fcs_set_ports(fcs* f, unsigned latency, unsigned depth, unsigned stall_permille, uint64_t seed) {
    f->port_latency = latency;
    f->port_depth = depth == 0 ? 1 : depth;
    f->stall_permille = stall_permille > 999 ? 999 : stall_permille;
    f->rng = seed == 0 ? 0x9E3779B97F4A7C15ULL : seed;
}

// Read beats slot `slot`'s engine has taken from its port (8 bytes each).
uint64_t fcs_port_beats(const fcs* f, unsigned slot) { return slot < SLOTS ? f->ports[slot].beats : 0; }

// A full reconfiguration's end: every register back to its reset value.
void fcs_reset(fcs* f) {
    f->reading = f->writing = f->b_pending = false;
    for (unsigned s = 0; s < SLOTS; s++) {
        f->ports[s].q.clear();
        f->ports[s].wq.clear();
        f->ports[s].offered = f->ports[s].b_offered = false;
    }
    f->top->rst = 1;
    for (int i = 0; i < 8; i++) cycle(f);
    f->top->rst = 0;
    cycle(f);
}

void fcs_run(fcs* f, uint64_t cycles) {
    for (uint64_t i = 0; i < cycles; i++) cycle(f);
}

uint64_t fcs_cycles(const fcs* f) { return f->cycles; }

int fcs_irq(const fcs* f) { return f->top->irq; }

int fcs_decoupled(const fcs* f, unsigned slot) { return (f->top->decoupled >> slot) & 1; }

// Slot `slot` holds no module (a greybox) or a module again.
void fcs_greybox(fcs* f, unsigned slot, int on) {
    if (on)
        f->top->greybox |= 1u << slot;
    else
        f->top->greybox &= ~(1u << slot);
}

// Slot `slot` holds the transformer's module (on) or the trigram engine's.
void fcs_lm_module(fcs* f, unsigned slot, int on) {
    if (on)
        f->top->lm_module |= 1u << slot;
    else
        f->top->lm_module &= ~(1u << slot);
}

void fcs_pr_active(fcs* f, unsigned slot, int on) {
    if (on)
        f->top->pr_active |= 1u << slot;
    else
        f->top->pr_active &= ~(1u << slot);
}

// An AXI4-Lite write on port `port`: address and data offered together,
// held until each is taken, then B. Returns the cycles it took.
unsigned fcs_write(fcs* f, unsigned port, uint32_t addr, uint32_t value) {
    Vfabric_cosim* t = f->top;
    unsigned bit = 1u << port, n = 0;
    bool aw_done = false, w_done = false;
    t->s_awaddr = addr;
    t->s_wdata = value;
    t->s_wstrb = 0xF;
    t->s_awvalid |= bit;
    t->s_wvalid |= bit;
    t->s_bready |= bit;
    for (;;) {
        half(f, 0);
        bool aw = (t->s_awvalid & bit) && (t->s_awready & bit);
        bool w = (t->s_wvalid & bit) && (t->s_wready & bit);
        bool b = (t->s_bvalid & bit) != 0;
        cycle(f);
        n++;
        if (aw) { aw_done = true; t->s_awvalid &= ~bit; }
        if (w) { w_done = true; t->s_wvalid &= ~bit; }
        if (b && aw_done && w_done) break;
        if (n > 10000) break;  // a slave that never answers: the caller reads garbage
    }
    t->s_bready &= ~bit;
    return n;
}

// An AXI4-Lite read on port `port`.
uint32_t fcs_read(fcs* f, unsigned port, uint32_t addr) {
    Vfabric_cosim* t = f->top;
    unsigned bit = 1u << port, n = 0;
    uint32_t value = 0;
    t->s_araddr = addr;
    t->s_arvalid |= bit;
    t->s_rready |= bit;
    for (;;) {
        half(f, 0);
        bool ar = (t->s_arvalid & bit) && (t->s_arready & bit);
        bool r = (t->s_rvalid & bit) != 0;
        if (r) {
            value = t->s_rdata[port];
        }
        cycle(f);
        n++;
        if (ar) t->s_arvalid &= ~bit;
        if (r) break;
        if (n > 10000) break;
    }
    t->s_rready &= ~bit;
    return value;
}

// Lets slot `slot` take `n` more steps (negative: any number).
void fcs_grant(fcs* f, unsigned slot, int64_t n) {
    if (slot >= 8) return;
    if (n < 0 || f->credits[slot] < 0)
        f->credits[slot] = n < 0 ? -1 : n;
    else
        f->credits[slot] += n;
}

// Steps slot `slot` may still take (-1: any number).
int64_t fcs_credits(const fcs* f, unsigned slot) {
    return slot < 8 ? f->credits[slot] : 0;
}

}  // extern "C"
