// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_regs: the shell's register window (docs/fabric-contract.md section
// 3) behind its register port: the host-written registers, whether the
// rings run (ENABLE, with the rings checked as it rises), the counters,
// EVENT_SEQ and FAULT_CODE kept from the other parts' event pulses, and the
// registered read of every register.
//
// Every part of the shell reports what it did as pulses: an event (EVENT_SEQ
// counts it), an error (CNT_ERRORS), a fault with its code (FAULT_CODE keeps
// the lowest-numbered source's when two come in one cycle), and the
// requests it accepted, completed, cancelled and the tokens it wrote. The
// pulses are counted a cycle later: the counters trail the work by a cycle,
// which no host can see across an AXI4-Lite read.

`default_nettype none

module fabric_regs #(
    parameter integer SLOTS = 2,
    parameter integer LANES = 4,
    parameter integer CPS = 8,
    parameter integer MAX_PROMPT = 1024,
    parameter integer MAX_OUTPUT = 256,
    parameter [31:0]  INTERFACE_ID = 32'h5EED_0002,
    parameter [31:0]  PREFILL_NS = 32'd20,
    parameter [31:0]  DECODE_NS = 32'd1000,
    parameter integer DAW = 40,
    parameter integer NEV = 4            // sources of event pulses
) (
    input  wire                  clk,
    input  wire                  rst,

    // The register port (fabric_axil).
    input  wire                  reg_we,
    input  wire [11:0]           reg_waddr,
    input  wire [31:0]           reg_wdata,
    input  wire                  reg_re,
    input  wire [11:0]           reg_raddr,
    output reg  [31:0]           reg_rdata,

    // Host-written registers.
    output reg  [31:0]           sq_tail,
    output reg  [31:0]           cq_head,
    output reg  [SLOTS-1:0]      quiesce,
    output wire [SLOTS*CPS*32-1:0] cancel,
    // Each slot's table: where it lies, its region's words, the commit
    // asked for (section 7).
    output wire [SLOTS*DAW-1:0]  tbl_base,
    output wire [SLOTS*32-1:0]   tbl_words,
    output wire [SLOTS*32-1:0]   tbl_commit,

    // The rings, as ENABLE found them.
    output reg                   enabled,
    output reg                   flush,     // a cycle: every context and queue starts afresh
    output reg  [DAW-1:0]        sq_addr,
    output reg  [11:0]           sq_mask,
    output reg  [31:0]           sq_entries,
    output reg  [DAW-1:0]        cq_addr,
    output reg  [11:0]           cq_mask,
    output reg  [31:0]           cq_entries,

    // The level interrupt (section 3).
    output reg                   irq,

    // Device state the window shows.
    input  wire [31:0]           sq_head,
    input  wire [31:0]           cq_tail,
    input  wire [SLOTS*4-1:0]    slot_state,
    input  wire [SLOTS*8-1:0]    slot_err,
    input  wire [SLOTS*32-1:0]   slot_engine,
    input  wire [SLOTS*32-1:0]   slot_loads,
    input  wire [SLOTS*32-1:0]   slot_crc,
    input  wire [SLOTS*32-1:0]   slot_committed,
    input  wire [SLOTS*256-1:0]  slot_identity,
    input  wire [SLOTS-1:0]      slot_idle,      // no decode step outstanding
    input  wire [SLOTS*8-1:0]    slot_active,

    // What the parts did, as pulses.
    input  wire [NEV-1:0]        ev_bump,
    input  wire [NEV-1:0]        ev_err,
    input  wire [NEV-1:0]        ev_fault,
    input  wire [NEV*8-1:0]      ev_code,
    input  wire [NEV-1:0]        ev_submitted,
    input  wire [NEV-1:0]        ev_completed,
    input  wire [NEV-1:0]        ev_cancelled,
    input  wire [NEV-1:0]        ev_token
);

`ifdef FABRIC_MUTANTS
    // Broken on purpose where the co-simulation is started with
    // +fabric_break_<name> (scripts/rtl-mutants); FABRIC_MUTANTS is defined
    // only for that build, never for a design synthesized.
`ifdef FABRIC_BREAK_IRQ
    // Always broken: scripts/formal's build, where nothing reads plusargs.
    wire break_irq = 1'b1;
`else
    reg break_irq;
    initial break_irq = $test$plusargs("fabric_break_irq") != 0;
`endif
`endif

    localparam integer NCTX = SLOTS * CPS;
    localparam [31:0]  MAGIC = 32'h4641_4252;  // "FABR"
    localparam [31:0]  VERSION = {16'd2, 16'd0};
    localparam [7:0]   F_RING = 8'd5;
    localparam [31:0]  CAPS = SLOTS | (LANES << 4) | (CPS << 12);

    reg        enable;              // CONTROL.ENABLE as the host wrote it
    reg        irq_enable;          // CONTROL.IRQ_ENABLE
    reg [31:0] event_ack;
    reg [31:0] event_seq;
    reg        enable_seen;
    reg        ring_fault;
    reg        rings_ok;            // the rings as programmed pass the checks
    reg        ring_event;          // ENABLE found them misprogrammed
    reg [31:0] sq_base_lo, sq_base_hi, cq_base_lo, cq_base_hi;
    reg [31:0] cancel_r [0:NCTX-1];
    reg [31:0] tbl_lo [0:SLOTS-1];
    reg [31:0] tbl_hi [0:SLOTS-1];
    reg [31:0] tbl_words_r [0:SLOTS-1];
    reg [31:0] tbl_commit_r [0:SLOTS-1];
    reg [31:0] fault_code;
    reg [31:0] cnt_submitted, cnt_completed, cnt_cancelled, cnt_tokens, cnt_errors;
    reg [31:0] cnt_active;

    localparam integer SLW = (SLOTS > 1) ? $clog2(SLOTS) : 1;
    localparam integer CXW = (NCTX > 1) ? $clog2(NCTX) : 1;

    genvar g;
    generate
        for (g = 0; g < NCTX; g = g + 1) begin : ctx_cancel
            assign cancel[32 * g +: 32] = cancel_r[g];
        end
        for (g = 0; g < SLOTS; g = g + 1) begin : slot_table
            wire [63:0] base = {tbl_hi[g], tbl_lo[g]};
            wire        unused_base = ^base[63:DAW];
            assign tbl_base[DAW * g +: DAW] = base[DAW-1:0];
            assign tbl_words[32 * g +: 32] = tbl_words_r[g];
            assign tbl_commit[32 * g +: 32] = tbl_commit_r[g];
        end
    endgenerate

    // ---- host writes ---------------------------------------------------------
    wire [5:0] w_slot = reg_waddr[11:6] - 6'd4;
    wire [9:0] w_ctx = reg_waddr[11:2] - 10'h100;
    wire [7:0] w_tbl = reg_waddr[11:4] - 8'h30;
    integer i;
    always @(posedge clk) begin
        if (rst) begin
            enable <= 1'b0;
            irq_enable <= 1'b0;
            sq_base_lo <= 32'd0;
            sq_base_hi <= 32'd0;
            sq_entries <= 32'd0;
            cq_base_lo <= 32'd0;
            cq_base_hi <= 32'd0;
            cq_entries <= 32'd0;
            sq_tail <= 32'd0;
            cq_head <= 32'd0;
            event_ack <= 32'd0;
            quiesce <= {SLOTS{1'b0}};
            for (i = 0; i < NCTX; i = i + 1)
                cancel_r[i] <= 32'd0;
            for (i = 0; i < SLOTS; i = i + 1) begin
                tbl_lo[i] <= 32'd0;
                tbl_hi[i] <= 32'd0;
                tbl_words_r[i] <= 32'd0;
                tbl_commit_r[i] <= 32'd0;
            end
        end else if (reg_we) begin
            // One writer per word: device registers ignore writes.
            case (reg_waddr)
                12'h020: {irq_enable, enable} <= reg_wdata[1:0];
                12'h028: sq_base_lo <= reg_wdata;
                12'h02C: sq_base_hi <= reg_wdata;
                12'h030: sq_entries <= reg_wdata;
                12'h034: cq_base_lo <= reg_wdata;
                12'h038: cq_base_hi <= reg_wdata;
                12'h03C: cq_entries <= reg_wdata;
                12'h040: sq_tail <= reg_wdata;
                12'h048: cq_head <= reg_wdata;
                12'h054: event_ack <= reg_wdata;
                default: ;
            endcase
            if (reg_waddr >= 12'h100 && reg_waddr < 12'h300 && reg_waddr[5:0] == 6'h08 &&
                {26'd0, w_slot} < SLOTS)
                quiesce[w_slot[SLW-1:0]] <= reg_wdata[0];
            if (reg_waddr >= 12'h400 && reg_waddr < 12'h800 && {22'd0, w_ctx} < NCTX)
                cancel_r[w_ctx[CXW-1:0]] <= reg_wdata;
            if (reg_waddr >= 12'h300 && reg_waddr < 12'h400 && {24'd0, w_tbl} < SLOTS)
                case (reg_waddr[3:0])
                    4'h0: tbl_lo[w_tbl[SLW-1:0]] <= reg_wdata;
                    4'h4: tbl_hi[w_tbl[SLW-1:0]] <= reg_wdata;
                    4'h8: tbl_words_r[w_tbl[SLW-1:0]] <= reg_wdata;
                    4'hC: tbl_commit_r[w_tbl[SLW-1:0]] <= reg_wdata;
                    default: ;
                endcase
        end
    end

    // ---- what the parts did ------------------------------------------------
    // Pulses are counted into registers first, then added: no path holds
    // both the count and a 32-bit add.
    localparam integer CW = $clog2(NEV + 2);
    function [CW-1:0] ones(input [NEV:0] v);
        integer k;
        begin
            ones = {CW{1'b0}};
            for (k = 0; k <= NEV; k = k + 1)
                ones = ones + {{(CW - 1){1'b0}}, v[k]};
        end
    endfunction

    // The fault of the lowest-numbered source this cycle (the ring's own
    // when ENABLE found the rings misprogrammed).
    function [7:0] first_code(input [NEV-1:0] valid, input [NEV*8-1:0] codes);
        integer k;
        begin
            first_code = F_RING;
            for (k = NEV - 1; k >= 0; k = k - 1)
                if (valid[k])
                    first_code = codes[8 * k +: 8];
        end
    endfunction

    reg [CW-1:0] n_bump, n_err, n_sub, n_comp, n_canc, n_tok;
    reg          fault_now;
    reg [7:0]    fault_now_code;
    always @(posedge clk) begin
        n_bump <= ones({ring_event, ev_bump});
        n_err <= ones({ring_event, ev_err});
        n_sub <= ones({1'b0, ev_submitted});
        n_comp <= ones({1'b0, ev_completed});
        n_canc <= ones({1'b0, ev_cancelled});
        n_tok <= ones({1'b0, ev_token});
        fault_now <= ring_event || ev_fault != {NEV{1'b0}};
        fault_now_code <= ring_event ? F_RING : first_code(ev_fault, ev_code);
        if (rst) begin
            event_seq <= 32'd0;
            fault_code <= 32'd0;
            cnt_submitted <= 32'd0;
            cnt_completed <= 32'd0;
            cnt_cancelled <= 32'd0;
            cnt_tokens <= 32'd0;
            cnt_errors <= 32'd0;
            fault_now <= 1'b0;
            n_bump <= {CW{1'b0}};
            n_err <= {CW{1'b0}};
            n_sub <= {CW{1'b0}};
            n_comp <= {CW{1'b0}};
            n_canc <= {CW{1'b0}};
            n_tok <= {CW{1'b0}};
        end else begin
            event_seq <= event_seq + {{(32 - CW){1'b0}}, n_bump};
            cnt_errors <= cnt_errors + {{(32 - CW){1'b0}}, n_err};
            cnt_submitted <= cnt_submitted + {{(32 - CW){1'b0}}, n_sub};
            cnt_completed <= cnt_completed + {{(32 - CW){1'b0}}, n_comp};
            cnt_cancelled <= cnt_cancelled + {{(32 - CW){1'b0}}, n_canc};
            cnt_tokens <= cnt_tokens + {{(32 - CW){1'b0}}, n_tok};
            if (fault_now)
                fault_code <= {24'd0, fault_now_code};
        end
    end

    // ---- ENABLE ----------------------------------------------------------------
    // Rising, the rings are checked (power-of-two sizes of 2..4096, bases
    // aligned and within the address width): the shell runs, or reports a
    // misprogrammed ring. Either edge starts every part afresh. A ring fault
    // raises no interrupt (the shell is not running); the host sees it in
    // STATUS.FAULT as it waits for RUNNING (section 5).
    wire [63:0] sq_base = {sq_base_hi, sq_base_lo};
    wire [63:0] cq_base = {cq_base_hi, cq_base_lo};
    wire sq_ok = sq_entries >= 32'd2 && sq_entries <= 32'd4096 &&
                 (sq_entries & (sq_entries - 32'd1)) == 32'd0 && sq_base_lo[5:0] == 6'd0 &&
                 (sq_base >> DAW) == 64'd0;
    wire cq_ok = cq_entries >= 32'd2 && cq_entries <= 32'd4096 &&
                 (cq_entries & (cq_entries - 32'd1)) == 32'd0 && cq_base_lo[4:0] == 5'd0 &&
                 (cq_base >> DAW) == 64'd0;
    always @(posedge clk) begin
        rings_ok <= sq_ok && cq_ok;
        flush <= 1'b0;
        ring_event <= 1'b0;
        if (rst) begin
            enable_seen <= 1'b0;
            enabled <= 1'b0;
            ring_fault <= 1'b0;
        end else if (enable != enable_seen) begin
            // rings_ok is a cycle old: the rings are written only while
            // stopped, before ENABLE (section 5), so it is settled.
            enable_seen <= enable;
            flush <= 1'b1;
            enabled <= enable && rings_ok;
            ring_fault <= enable && !rings_ok;
            ring_event <= enable && !rings_ok;
            sq_addr <= sq_base[DAW-1:0];
            cq_addr <= cq_base[DAW-1:0];
            sq_mask <= sq_entries[11:0] - 12'd1;
            cq_mask <= cq_entries[11:0] - 12'd1;
        end else if (fault_now && fault_now_code == F_RING) begin
            // A completion the ring could not take (a bus error posting it).
            ring_fault <= 1'b1;
        end
    end

    function [31:0] active_sum(input [SLOTS*8-1:0] per_slot);
        integer k;
        begin
            active_sum = 32'd0;
            for (k = 0; k < SLOTS; k = k + 1)
                active_sum = active_sum + {24'd0, per_slot[8 * k +: 8]};
        end
    endfunction

    always @(posedge clk)
        cnt_active <= active_sum(slot_active);

    // ---- the interrupt ---------------------------------------------------------
    // Exactly the contract's equation, a cycle later: running, enabled, and
    // a completion or an event the host has not acknowledged.
    always @(posedge clk)
`ifdef FABRIC_MUTANTS
        // Broken: events raise nothing.
        irq <= !rst && enabled && irq_enable &&
               (cq_tail != cq_head || (!break_irq && event_seq != event_ack));
`else
        irq <= !rst && enabled && irq_enable && (cq_tail != cq_head || event_seq != event_ack);
`endif

    // ---- reads ---------------------------------------------------------------
    // The DFX AXI Shutdown Manager's encoding: requested, both channels
    // idle, write channel, read channel.
    function [31:0] shutdown_bits(input q, input idle);
        shutdown_bits = {28'd0, q && idle, q, q && idle, q};
    endfunction

    wire [5:0] r_slot = reg_raddr[11:6] - 6'd4;
    wire [5:0] r_off = reg_raddr[5:0];
    wire [9:0] r_ctx = reg_raddr[11:2] - 10'h100;
    wire [7:0] r_tbl = reg_raddr[11:4] - 8'h30;
    wire [SLW-1:0] rs = r_slot[SLW-1:0];
    wire [SLW-1:0] rt = r_tbl[SLW-1:0];
    wire [CXW-1:0] rc = r_ctx[CXW-1:0];
    wire [255:0]   r_identity = slot_identity[256 * rs +: 256];

    always @(posedge clk) begin
        if (reg_re) begin
            reg_rdata <= 32'd0;
            if (reg_raddr < 12'h100) begin
                case (reg_raddr)
                    12'h000: reg_rdata <= MAGIC;
                    12'h004: reg_rdata <= VERSION;
                    12'h008: reg_rdata <= CAPS;
                    12'h00C: reg_rdata <= MAX_PROMPT;
                    12'h010: reg_rdata <= MAX_OUTPUT;
                    12'h014: reg_rdata <= INTERFACE_ID;
                    12'h018: reg_rdata <= PREFILL_NS;
                    12'h01C: reg_rdata <= DECODE_NS;
                    12'h020: reg_rdata <= {30'd0, irq_enable, enable};
                    // DARK is the kernel's to know (section 7): it reads 0.
                    12'h024: reg_rdata <= {29'd0, ring_fault, 1'b0, enabled};
                    12'h028: reg_rdata <= sq_base_lo;
                    12'h02C: reg_rdata <= sq_base_hi;
                    12'h030: reg_rdata <= sq_entries;
                    12'h034: reg_rdata <= cq_base_lo;
                    12'h038: reg_rdata <= cq_base_hi;
                    12'h03C: reg_rdata <= cq_entries;
                    12'h040: reg_rdata <= sq_tail;
                    12'h044: reg_rdata <= sq_head;
                    12'h048: reg_rdata <= cq_head;
                    12'h04C: reg_rdata <= cq_tail;
                    12'h050: reg_rdata <= event_seq;
                    12'h054: reg_rdata <= event_ack;
                    12'h058: reg_rdata <= fault_code;
                    12'h060: reg_rdata <= cnt_submitted;
                    12'h064: reg_rdata <= cnt_completed;
                    12'h068: reg_rdata <= cnt_cancelled;
                    12'h06C: reg_rdata <= cnt_active;
                    12'h070: reg_rdata <= cnt_tokens;
                    12'h074: reg_rdata <= cnt_errors;
                    default: ;
                endcase
            end else if (reg_raddr < 12'h300) begin
                if ({26'd0, r_slot} < SLOTS) begin
                    case (r_off)
                        6'h00: reg_rdata <= {16'd0, slot_err[8 * rs +: 8], 4'd0,
                                             slot_state[4 * rs +: 4]};
                        6'h04: reg_rdata <= slot_engine[32 * rs +: 32];
                        6'h08: reg_rdata <= {31'd0, quiesce[rs]};
                        6'h0C: reg_rdata <= shutdown_bits(quiesce[rs], slot_idle[rs]);
                        6'h10: reg_rdata <= {24'd0, slot_active[8 * rs +: 8]};
                        6'h14: reg_rdata <= slot_loads[32 * rs +: 32];
                        6'h18: reg_rdata <= slot_crc[32 * rs +: 32];
                        6'h1C: reg_rdata <= slot_committed[32 * rs +: 32];
                        6'h20, 6'h24, 6'h28, 6'h2C, 6'h30, 6'h34, 6'h38, 6'h3C:
                            reg_rdata <= r_identity[255 - 32 * r_off[4:2] -: 32];
                        default: ;
                    endcase
                end
            end else if (reg_raddr < 12'h400) begin
                if ({24'd0, r_tbl} < SLOTS) begin
                    case (reg_raddr[3:0])
                        4'h0: reg_rdata <= tbl_lo[rt];
                        4'h4: reg_rdata <= tbl_hi[rt];
                        4'h8: reg_rdata <= tbl_words_r[rt];
                        4'hC: reg_rdata <= tbl_commit_r[rt];
                        default: ;
                    endcase
                end
            end else if (reg_raddr >= 12'h400 && reg_raddr < 12'h800) begin
                if ({22'd0, r_ctx} < NCTX)
                    reg_rdata <= cancel_r[rc];
            end
        end
    end
`ifdef FORMAL
    // ---- formal properties (scripts/formal, this module alone) ------------
    // Every input is free: the host's register accesses, the parts' pulses
    // and the state they report.
    reg f_past_valid = 1'b0;
    always @(posedge clk)
        f_past_valid <= 1'b1;
    always @(*)
        if (!f_past_valid)
            assume(rst);

    always @(posedge clk)
        if (f_past_valid) begin
            // The interrupt is, a cycle later, exactly the contract's
            // equation (section 3), and low out of reset.
            a_irq_equation: assert(irq == (!$past(rst) && $past(enabled && irq_enable &&
                                   (cq_tail != cq_head || event_seq != event_ack))));
            // The shell runs (RUNNING) only with rings that passed the
            // checks, and every part starts afresh whenever it starts or
            // stops.
            if (!$past(rst) && enabled != $past(enabled))
                a_running_changes_with_flush: assert(flush);
            if (!$past(rst) && enabled && !$past(enabled))
                a_runs_only_checked_rings: assert($past(rings_ok) && $past(enable));
        end

    // Reachability (scripts/formal): the interrupt raised by an event
    // alone, the running shell's completions all consumed.
    reg f_cq_drained = 1'b0;
    always @(posedge clk)
        f_cq_drained <= cq_tail == cq_head;
    (* keep *) wire f_reach = f_past_valid && !rst && irq && f_cq_drained;
    (* keep *) wire f_unreached = !f_reach;
`endif
endmodule

`default_nettype wire
