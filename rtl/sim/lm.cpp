// SPDX-License-Identifier: MIT OR Apache-2.0
//
// The C interface of the Verilated transformer engine
// (rtl/engine/lm/fabric_lm.v), alone: firmware/fabric-rtl's `lm` module
// links it to check the engine against fabric_model::lm token for token.
// Same pattern as cosim.cpp: an opaque handle, plain calls, the clock
// stepped a cycle at a time.
//
// The engine's HP port is answered here from a memory this file owns (the
// test writes the weights and the prompts into it, and reads the keys and
// values back): reads in bursts, each after a latency, several
// outstanding, in order; writes taken on AW and W independently and
// answered on B after the latency. With stalls on, every ready and valid
// the port drives may drop at random (a seeded generator, so a run
// repeats): the engine must keep AXI's rules whatever the port does. An
// address range may be told to answer with SLVERR.

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>

#include "Vfabric_lm.h"
#include "verilated.h"
#include "breaks.h"

extern "C" {

struct flm {
    VerilatedContext* context;
    Vfabric_lm* top;
    uint64_t cycles;
    uint64_t base;
    std::vector<uint8_t> mem;
    unsigned latency;
    unsigned stall_permille;
    uint64_t rng;
    uint64_t fail_lo, fail_hi;
    struct burst {
        uint64_t addr;
        unsigned left;
        uint64_t due;
    };
    std::deque<burst> rq;
    bool r_offered;
    std::deque<uint64_t> aw;
    std::deque<std::pair<uint64_t, unsigned>> w;
    std::deque<std::pair<uint64_t, unsigned>> b;   // due, resp
    bool b_offered;
    uint64_t read_beats, writes;
    // This cycle's slave outputs.
    bool arready, rvalid, awready, wready, bvalid;
};

static unsigned roll(flm* f) {
    f->rng ^= f->rng >> 12;
    f->rng ^= f->rng << 25;
    f->rng ^= f->rng >> 27;
    return static_cast<unsigned>(((f->rng * 0x2545F4914F6CDD1DULL) >> 32) % 1000);
}

static bool go(flm* f) { return f->stall_permille == 0 || roll(f) >= f->stall_permille; }

static bool failing(flm* f, uint64_t addr) { return addr >= f->fail_lo && addr < f->fail_hi; }

// A 64-bit beat of memory at an 8-aligned address; false outside it.
static bool beat(flm* f, uint64_t addr, uint64_t* v) {
    if (addr < f->base || addr - f->base + 8 > f->mem.size()) return false;
    std::memcpy(v, &f->mem[addr - f->base], 8);
    return true;
}

static void drive(flm* f) {
    Vfabric_lm* t = f->top;
    f->arready = f->rq.size() < 8 && go(f);
    bool due = !f->rq.empty() && f->rq.front().due <= f->cycles;
    f->rvalid = due && (f->r_offered || go(f));
    uint64_t data = 0;
    unsigned resp = 0;
    if (f->rvalid) {
        uint64_t a = f->rq.front().addr;
        if (!beat(f, a, &data) || failing(f, a)) resp = 2;
    }
    t->m_arready = f->arready;
    t->m_rvalid = f->rvalid;
    t->m_rdata = data;
    t->m_rresp = resp;
    t->m_rlast = f->rvalid && f->rq.front().left == 1;
    f->awready = f->aw.size() < 8 && go(f);
    f->wready = f->w.size() < 8 && go(f);
    t->m_awready = f->awready;
    t->m_wready = f->wready;
    f->bvalid = !f->b.empty() && f->b.front().first <= f->cycles && (f->b_offered || go(f));
    t->m_bvalid = f->bvalid;
    t->m_bresp = f->bvalid ? f->b.front().second : 0;
}

static void cycle(flm* f) {
    Vfabric_lm* t = f->top;
    drive(f);
    t->clk = 0;
    t->eval();
    // What was handshaken this cycle, sampled before the edge. Nothing is
    // in reset: the port is reset with the engine (AMBA AXI, A3.1.2), and
    // before its first edge a master's valid may hold anything.
    bool live = !t->rst;
    bool ar = live && t->m_arvalid && f->arready;
    uint64_t araddr = t->m_araddr;
    unsigned arlen = t->m_arlen;
    bool r = live && f->rvalid && t->m_rready;
    bool awt = live && t->m_awvalid && f->awready;
    uint64_t awaddr = t->m_awaddr;
    bool wt = live && t->m_wvalid && f->wready;
    uint64_t wdata = t->m_wdata;
    unsigned wstrb = t->m_wstrb;
    bool bt = live && f->bvalid && t->m_bready;
    t->clk = 1;
    t->eval();
    f->cycles++;
    f->r_offered = f->rvalid && !r;
    if (r) {
        f->read_beats++;
        f->rq.front().addr += 8;
        if (--f->rq.front().left == 0) f->rq.pop_front();
    }
    if (ar) {
        uint64_t due = f->cycles + f->latency +
                       (f->stall_permille ? roll(f) * (f->latency / 2 + 1) / 1000 : 0);
        if (!f->rq.empty() && f->rq.back().due > due) due = f->rq.back().due;
        f->rq.push_back({araddr, arlen + 1, due});
    }
    if (awt) f->aw.push_back(awaddr);
    if (wt) f->w.push_back({wdata, wstrb});
    f->b_offered = f->bvalid && !bt;
    if (bt) f->b.pop_front();
    while (!f->aw.empty() && !f->w.empty()) {
        uint64_t a = f->aw.front();
        auto [d, s] = f->w.front();
        f->aw.pop_front();
        f->w.pop_front();
        unsigned resp = 0;
        if (a < f->base || a - f->base + 8 > f->mem.size() || failing(f, a)) {
            resp = 2;
        } else {
            for (unsigned i = 0; i < 8; i++)
                if ((s >> i) & 1) f->mem[a - f->base + i] = static_cast<uint8_t>(d >> (8 * i));
        }
        f->writes++;
        f->b.push_back({f->cycles + f->latency, resp});
    }
}

flm* flm_new(uint64_t base, uint64_t len, unsigned latency, unsigned stall_permille, uint64_t seed) {
    flm* f = new flm();
    f->context = new VerilatedContext;
#ifdef FCS_X_UNIQUE
    // Every register and memory from a random value (the model was built
    // with --x-initial unique): the engine must reset what it relies on.
    f->context->randReset(2);
    f->context->randSeed(static_cast<int>(seed % 1000000007ULL) + 1);
#endif
    fabric_breaks(f->context);
    f->top = new Vfabric_lm{f->context};
    f->base = base;
    f->mem.assign(len, 0);
    f->latency = latency;
    f->stall_permille = stall_permille;
    f->rng = seed | 1;
    f->fail_lo = f->fail_hi = 0;
    // Every input driven from the start: under --x-initial unique an
    // undriven one holds a random value (a commit or a step nobody asked
    // for).
    Vfabric_lm* t = f->top;
    t->tbl_start = 0;
    t->tbl_base = 0;
    t->tbl_region = 0;
    t->req_valid = 0;
    t->req_lane = 0;
    t->req_first = 0;
    t->req_prompt = 0;
    t->req_len = 0;
    t->req_draw = 0;
    t->req_greedy = 0;
    t->req_inv_t = 0;
    t->rsp_ready = 0;
    t->rst = 1;
    for (int i = 0; i < 8; i++) cycle(f);
    f->top->rst = 0;
    cycle(f);
    return f;
}

void flm_free(flm* f) {
    if (!f) return;
    f->top->final();
    delete f->top;
    delete f->context;
    delete f;
}

int flm_mem_write(flm* f, uint64_t addr, const uint8_t* bytes, uint64_t len) {
    if (addr < f->base || addr - f->base + len > f->mem.size()) return -1;
    std::memcpy(&f->mem[addr - f->base], bytes, len);
    return 0;
}

int flm_mem_read(flm* f, uint64_t addr, uint8_t* bytes, uint64_t len) {
    if (addr < f->base || addr - f->base + len > f->mem.size()) return -1;
    std::memcpy(bytes, &f->mem[addr - f->base], len);
    return 0;
}

void flm_fail_range(flm* f, uint64_t lo, uint64_t hi) {
    f->fail_lo = lo;
    f->fail_hi = hi;
}

// A commit: the result (0 taken, 1 refused, 2 a read failed) with the CRC
// and the identity, or -1 if none came within max_cycles.
int flm_commit(flm* f, uint64_t base, uint32_t region, uint64_t max_cycles, uint32_t* crc,
               uint8_t* identity) {
    Vfabric_lm* t = f->top;
    t->tbl_base = base;
    t->tbl_region = region;
    t->tbl_start = 1;
    cycle(f);
    t->tbl_start = 0;
    for (uint64_t n = 0; n < max_cycles; n++) {
        if (t->tbl_done) {
            *crc = t->tbl_crc;
            for (int i = 0; i < 32; i++) {
                // identity[255:0], the first header word most significant:
                // byte i of the SHA-256 is bits [255 - 8i -: 8].
                unsigned bit = 255 - 8 * i - 7;
                identity[i] = static_cast<uint8_t>(t->identity[bit / 32] >> (bit % 32));
            }
            return t->tbl_result;
        }
        cycle(f);
    }
    return -1;
}

// Offers a step for a lane; 0 once taken, -1 if not within max_cycles.
int flm_request(flm* f, unsigned lane, int first, uint64_t prompt, uint32_t len, uint32_t draw,
                int greedy, uint32_t inv_t, uint64_t max_cycles) {
    Vfabric_lm* t = f->top;
    t->req_lane = lane;
    t->req_first = first ? 1 : 0;
    t->req_prompt = prompt;
    t->req_len = len;
    t->req_draw = draw;
    t->req_greedy = greedy ? 1 : 0;
    t->req_inv_t = inv_t;
    t->req_valid = 1;
    for (uint64_t n = 0; n < max_cycles; n++) {
        t->clk = 0;
        t->eval();
        bool taken = t->req_ready;
        cycle(f);
        if (taken) {
            t->req_valid = 0;
            return 0;
        }
    }
    t->req_valid = 0;
    return -1;
}

// Clocks until the engine answers a step: 1 with its lane, token and
// fault, 0 if none within max_cycles.
int flm_response(flm* f, uint64_t max_cycles, unsigned* lane, uint32_t* token, unsigned* fault) {
    Vfabric_lm* t = f->top;
    for (uint64_t n = 0; n < max_cycles; n++) {
        t->clk = 0;
        t->eval();
        if (t->rsp_valid) {
            *lane = t->rsp_lane;
            *token = t->rsp_token;
            *fault = t->rsp_fault;
            t->rsp_ready = 1;
            cycle(f);
            t->rsp_ready = 0;
            return 1;
        }
        cycle(f);
    }
    return 0;
}

uint64_t flm_cycles(const flm* f) { return f->cycles; }
uint64_t flm_read_beats(const flm* f) { return f->read_beats; }
uint64_t flm_writes(const flm* f) { return f->writes; }
int flm_reading(flm* f) {
    f->top->clk = 0;
    f->top->eval();
    return f->top->reading;
}

}  // extern "C"
