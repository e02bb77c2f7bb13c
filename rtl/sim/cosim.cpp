// SPDX-License-Identifier: MIT OR Apache-2.0
//
// The C interface of the Verilated fabric (rtl/sim/fabric_cosim.v), after
// chipsalliance/caliptra-sw's hw/verilated: an opaque handle, plain calls,
// the clock stepped a cycle at a time. firmware/fabric-rtl links it.
//
// Every register access is an AXI4-Lite transaction on the port's
// channels, clocked until its response; the fabric's AXI4 master is
// answered by a DDR model here that reads and writes the host's memory
// through a callback (a decode error for an address outside it), after a
// fixed read latency.

#include <cstdint>
#include <cstring>

#include <cstdio>

#include "Vfabric_cosim.h"
#include "Vfabric_cosim__Dpi.h"
#include "svdpi.h"
#include "verilated.h"

extern "C" {

// Reads (write = 0) or writes one 32-bit word of DDR at a physical
// address; returns 0, or non-zero for an address outside the memory.
typedef int (*fcs_mem_fn)(void* ctx, uint64_t addr, uint32_t* word, int write);

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
};

static void half(fcs* f, int clk) {
    f->top->clk = clk;
    f->top->eval();
}

// The DDR side of one cycle: drives the slave's outputs for this cycle from
// the state, then clocks, then takes what was handshaken.
static void cycle(fcs* f) {
    Vfabric_cosim* t = f->top;
    // Outputs of the DDR model for this cycle.
    t->m_arready = !f->reading;
    t->m_rvalid = f->reading && f->r_wait == 0;
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
    t->m_awready = !f->writing && !f->b_pending;
    t->m_wready = f->writing;
    t->m_bvalid = f->b_pending;
    t->m_bresp = f->w_err ? 3 : 0;
    half(f, 0);
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
    if (f->reading && f->r_wait > 0) f->r_wait--;
    if (r) {
        f->r_addr += 4;
        if (--f->r_left == 0) f->reading = false;
    }
    if (ar) {
        f->reading = true;
        f->r_addr = araddr;
        f->r_left = arlen + 1;
        f->r_wait = f->read_latency;
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
    fcs* f = new fcs();
    f->context = new VerilatedContext();
    f->top = new Vfabric_cosim(f->context, "fabric");
    f->read_latency = read_latency;
    for (unsigned s = 0; s < 8; s++) f->credits[s] = -1;
    // Power-on with no module in any slot: greyboxes.
    f->top->greybox = ~0u;
    f->top->rst = 1;
    for (int i = 0; i < 8; i++) cycle(f);
    f->top->rst = 0;
    cycle(f);
    return f;
}

void fcs_free(fcs* f) {
    if (!f) return;
    f->top->final();
    delete f->top;
    delete f->context;
    delete f;
}

void fcs_set_mem(fcs* f, fcs_mem_fn mem, void* ctx) {
    f->mem = mem;
    f->mem_ctx = ctx;
}

// A full reconfiguration's end: every register back to its reset value.
void fcs_reset(fcs* f) {
    f->reading = f->writing = f->b_pending = false;
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

// Writes a table into slot `slot`'s memory, as the configuration port
// does during a partial load. Returns 0, or -1 for no such slot.
int fcs_table_write(fcs* f, unsigned slot, const uint32_t* words, size_t n) {
    char name[64];
    std::snprintf(name, sizeof name, "fabric.fabric_cosim.slot[%u].rm", slot);
    svScope scope = svGetScopeFromName(name);
    if (!scope) return -1;
    svSetScope(scope);
    for (size_t i = 0; i < n; i++) fabric_table_write(static_cast<int>(i), static_cast<int>(words[i]));
    return 0;
}

}  // extern "C"
