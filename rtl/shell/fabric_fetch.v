// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_fetch: the submission ring (docs/fabric-contract.md sections 4-6).
// It reads the next descriptor the host made available (SQ_TAIL - SQ_HEAD
// in 1..SQ_ENTRIES), sixteen words, its CRC taken as they arrive; checks it
// (CRC, sequence, fields, the context free, the slot usable); turns the
// temperature into the inverse temperature (section 8: a 42-cycle
// division); reads the prompt's last two tokens; and hands the request to
// its slot's context table, or a DONE refusing it to the completion queue.
// One descriptor at a time: a slot that cannot take one holds the ring.

`default_nettype none

module fabric_fetch #(
    parameter integer SLOTS = 2,
    parameter integer CPS = 8,
    parameter integer MAX_PROMPT = 1024,
    parameter integer MAX_OUTPUT = 256,
    parameter integer DAW = 40,
    // Derived from the parameters above: leave them be.
    parameter integer NCTX = SLOTS * CPS,
    parameter integer SW = (SLOTS > 1) ? $clog2(SLOTS) : 1,
    parameter integer LW = (CPS > 1) ? $clog2(CPS) : 1,
    parameter integer EW = 168          // a completion entry (fabric_cq)
) (
    input  wire             clk,
    input  wire             rst,
    input  wire             flush,
    input  wire             enabled,

    input  wire [DAW-1:0]   sq_addr,
    input  wire [11:0]      sq_mask,
    input  wire [31:0]      sq_entries,
    input  wire [31:0]      sq_tail,
    output reg  [31:0]      sq_head,

    // Its share of the HP port (fabric_dma_arb).
    output reg              dma_valid,
    input  wire             dma_ready,
    output reg  [DAW-1:0]   dma_addr,
    output reg  [4:0]       dma_words,
    input  wire             dma_rd_valid,
    input  wire [31:0]      dma_rd_data,
    input  wire [3:0]       dma_rd_index,
    input  wire             dma_done,
    input  wire             dma_err,

    input  wire [NCTX-1:0]  ctx_busy,
    input  wire [SLOTS-1:0] slot_usable,

    // The request, to its slot's context table.
    output reg  [SLOTS-1:0] acc_valid,
    input  wire [SLOTS-1:0] acc_ready,
    output reg  [LW-1:0]    acc_ctx,     // within the slot
    output reg  [31:0]      acc_tag,
    output reg  [31:0]      acc_a,
    output reg  [31:0]      acc_b,
    output reg  [63:0]      acc_seed,
    output reg              acc_greedy,
    output reg  [19:0]      acc_inv_t,
    output reg  [15:0]      acc_max,
    output reg  [31:0]      acc_stop,
    output reg  [DAW-1:0]   acc_out,
    output reg              acc_stream,
    output reg  [DAW-1:0]   acc_prompt,  // the prompt, for an engine that feeds it all
    output reg  [15:0]      acc_len,

    // A refusal, to the completion queue.
    output reg              ref_valid,
    input  wire             ref_ready,
    output wire [EW-1:0]    ref_entry,

    output reg              ev_bump,
    output reg              ev_err,
    output reg              ev_fault,
    output reg  [7:0]       ev_code,
    output reg              ev_submitted
);

`ifdef FABRIC_MUTANTS
    // Broken on purpose where the co-simulation is started with
    // +fabric_break_<name> (scripts/rtl-mutants); FABRIC_MUTANTS is defined
    // only for that build, never for a design synthesized.
    reg break_crc;
    initial break_crc = $test$plusargs("fabric_break_crc") != 0;
`endif

`include "fabric_crc32.vh"

    localparam [31:0] EOS = 32'd256;
    localparam [7:0] F_BAD_CRC = 8'd1, F_STALE = 8'd2, F_BUSY = 8'd3, F_NOT_READY = 8'd4;
    localparam [7:0] ST_BAD = 8'd2, ST_NOT_READY = 8'd3, ST_STALE = 8'd5;
    localparam [7:0] K_DONE = 8'd2;

    localparam [3:0]
        S_IDLE      = 4'd0,
        S_READ      = 4'd1,
        S_CHECK     = 4'd2,
        S_DECIDE    = 4'd3,
        S_DIV       = 4'd4,
        S_PA        = 4'd5,
        S_PA_WAIT   = 4'd6,
        S_PB        = 4'd7,
        S_PB_WAIT   = 4'd8,
        S_ACCEPT    = 4'd9,
        S_HAND      = 4'd10,
        S_REFUSE    = 4'd11;
    reg [3:0] state;

    reg [31:0] d [0:15];
    reg [31:0] d_crc;
    reg        d_err;
    reg [31:0] d_seq;
    // What the checks made of it.
    reg        c_bad_crc, c_zero, c_stale, c_fields, c_busy, c_usable;
    reg [DAW-1:0] prompt_last;
    reg [SW-1:0]  d_slot;
    // The refusal being offered.
    reg [31:0] r_tag, r_n;
    reg [15:0] r_ctx;
    reg [7:0]  r_status;
    // The divider for floor(2^shift / M).
    reg [41:0] div_num;
    reg [23:0] div_m;
    reg [23:0] div_rem;
    reg [19:0] div_q;                   // floor(256 / T) < 2^18 for T > 0.001
    reg [5:0]  div_i;
    reg [7:0]  d_exp;

    assign ref_entry = {r_tag, r_ctx, K_DONE, r_status, r_n, 32'd0, 32'd0, 8'd0};

    wire [31:0] pending = sq_tail - sq_head;
    wire [63:0] prompt_addr = {d[5], d[4]};
    wire [63:0] output_addr = {d[9], d[8]};
    wire [63:0] prompt_end = prompt_addr + {30'd0, d[6], 2'b00} - 64'd4;
    wire        unused_prompt_end = ^prompt_end[63:DAW];
    wire [31:0] temp = d[11];
    wire [15:0] ctx16 = d[3][15:0];
    wire [7:0]  slot8 = d[1][23:16];

    // The slot a context belongs to, and the context within it.
    function [SW:0] slot_of(input [15:0] ctx);
        integer k;
        begin
            slot_of = {1'b1, {SW{1'b0}}};  // none
            for (k = 0; k < SLOTS; k = k + 1)
                if ({16'd0, ctx} >= k * CPS && {16'd0, ctx} < (k + 1) * CPS)
                    slot_of = {1'b0, k[SW-1:0]};
        end
    endfunction
    wire [SW:0] ctx_slot = slot_of(ctx16);
    wire [LW-1:0] ctx_local = ctx16[LW-1:0] - (CPS[LW-1:0] * ctx_slot[SW-1:0]);

    wire fields_ok =
        d[1][15:0] == 16'd1 && d[2] != 32'd0 && !ctx_slot[SW] && {24'd0, slot8} < SLOTS &&
        {{(8 - SW){1'b0}}, ctx_slot[SW-1:0]} == slot8 &&
        d[6] >= 32'd1 && d[6] <= MAX_PROMPT && d[7] >= 32'd1 && d[7] <= MAX_OUTPUT &&
        d[10] >= d[7] && (prompt_addr >> DAW) == 64'd0 && (output_addr >> DAW) == 64'd0;

    wire all_zero = (d[0] | d[1] | d[2] | d[3] | d[4] | d[5] | d[6] | d[7] | d[8] | d[9] |
                     d[10] | d[11] | d[12] | d[13] | d[14] | d[15]) == 32'd0;

    // The restoring division's step: the partial remainder stays below M,
    // so 24 bits hold it.
    wire [24:0] div_sub = {div_rem, div_num[div_i]} - {1'b0, div_m};
    wire        unused_div = div_sub[24];

    always @(posedge clk) begin
        ev_bump <= 1'b0;
        ev_err <= 1'b0;
        ev_fault <= 1'b0;
        ev_submitted <= 1'b0;
        if (rst || flush) begin
            state <= S_IDLE;
            sq_head <= 32'd0;
            dma_valid <= 1'b0;
            acc_valid <= {SLOTS{1'b0}};
            ref_valid <= 1'b0;
        end else begin
            case (state)
                S_IDLE: begin
                    if (enabled && pending != 32'd0 && pending <= sq_entries) begin
                        dma_valid <= 1'b1;
                        dma_addr <= sq_addr + {{(DAW - 18){1'b0}}, sq_head[11:0] & sq_mask, 6'd0};
                        dma_words <= 5'd16;
                        d_crc <= 32'hFFFF_FFFF;
                        d_seq <= sq_head;
                        d_err <= 1'b0;
                        state <= S_READ;
                    end
                end

                S_READ: begin
                    if (dma_ready)
                        dma_valid <= 1'b0;
                    if (dma_rd_valid) begin
                        d[dma_rd_index] <= dma_rd_data;
                        if (dma_rd_index != 4'd15)
                            d_crc <= crc32_word(d_crc, dma_rd_data);
                    end
                    if (dma_done) begin
                        d_err <= dma_err;
                        sq_head <= sq_head + 32'd1;
                        state <= S_CHECK;
                    end
                end

                S_CHECK: begin
`ifdef FABRIC_MUTANTS
                    // Broken: no CRC check.
                    c_bad_crc <= d_err || (!break_crc && ~d_crc != d[15]);
`else
                    c_bad_crc <= d_err || ~d_crc != d[15];
`endif
                    c_zero <= all_zero;
                    c_stale <= d[0] != d_seq;
                    c_fields <= fields_ok;
                    c_busy <= ctx_busy[ctx16[$clog2(NCTX) - 1:0]];
                    c_usable <= slot_usable[slot8[SW-1:0]];
                    d_slot <= slot8[SW-1:0];
                    prompt_last <= prompt_end[DAW-1:0];
                    d_exp <= temp[30:23];
                    state <= S_DECIDE;
                end

                S_DECIDE: begin
                    if (c_bad_crc || c_stale || !c_fields || c_busy || !c_usable) begin
                        state <= S_REFUSE;
                        // A refusal the device cannot pin on a tag names
                        // the descriptor by its SQ index (section 4).
                        r_tag <= c_busy || (!c_bad_crc && !c_stale && c_fields) ? d[2] : 32'd0;
                        r_ctx <= c_busy || (!c_bad_crc && !c_stale && c_fields) ? ctx16 : 16'd0;
                        r_n <= (!c_bad_crc && !c_stale && c_fields && !c_busy) ? 32'd0 : d_seq;
                        if (c_bad_crc) begin
                            // All zero: most likely written but not flushed.
                            r_status <= (!d_err && c_zero) ? ST_STALE : ST_BAD;
                            ev_code <= (!d_err && c_zero) ? F_STALE : F_BAD_CRC;
                        end else if (c_stale) begin
                            r_status <= ST_STALE;
                            ev_code <= F_STALE;
                        end else if (!c_fields) begin
                            r_status <= ST_BAD;
                            ev_code <= F_BAD_CRC;
                        end else if (c_busy) begin
                            // Its tag is intact, but its context is another
                            // request's.
                            r_status <= ST_BAD;
                            ev_code <= F_BUSY;
                        end else begin
                            r_status <= ST_NOT_READY;
                            ev_code <= F_NOT_READY;
                        end
                    end else begin
                        // Sampling::from_bits: infinities and NaN as T = 1,
                        // small and negative greedy, else floor(2^(158-E) / M).
                        div_m <= {1'b1, temp[22:0]};
                        div_rem <= 24'd0;
                        div_q <= 20'd0;
                        div_i <= 6'd41;
                        div_num <= (d_exp > 8'd158) ? 42'd0 : (42'd1 << (8'd158 - d_exp));
                        acc_inv_t <= 20'd256;
                        acc_greedy <= d_exp != 8'hFF && (temp[31] || temp <= 32'h3A83_126F);
                        if (d_exp == 8'hFF || temp[31] || temp <= 32'h3A83_126F)
                            state <= S_PA;
                        else
                            state <= S_DIV;
                    end
                end

                S_DIV: begin
                    // Restoring division, a quotient bit a cycle.
                    if ({div_rem, div_num[div_i]} >= {1'b0, div_m}) begin
                        div_rem <= div_sub[23:0];
                        if (div_i < 6'd20)
                            div_q[div_i[4:0]] <= 1'b1;
                    end else begin
                        div_rem <= {div_rem[22:0], div_num[div_i]};
                    end
                    if (div_i == 6'd0)
                        state <= S_PA;
                    else
                        div_i <= div_i - 6'd1;
                end

                S_PA: begin
                    if (d_exp != 8'hFF && !acc_greedy)
                        acc_inv_t <= div_q;
                    if (d[6] >= 32'd2) begin
                        dma_valid <= 1'b1;
                        dma_addr <= prompt_last - {{(DAW - 3){1'b0}}, 3'd4};
                        dma_words <= 5'd1;
                        state <= S_PA_WAIT;
                    end else begin
                        acc_a <= EOS;
                        state <= S_PB;
                    end
                end

                S_PA_WAIT: begin
                    if (dma_ready)
                        dma_valid <= 1'b0;
                    if (dma_rd_valid)
                        acc_a <= dma_rd_data;
                    if (dma_done) begin
                        d_err <= dma_err;
                        state <= S_PB;
                    end
                end

                S_PB: begin
                    dma_valid <= 1'b1;
                    dma_addr <= prompt_last;
                    dma_words <= 5'd1;
                    state <= S_PB_WAIT;
                end

                S_PB_WAIT: begin
                    if (dma_ready)
                        dma_valid <= 1'b0;
                    if (dma_rd_valid)
                        acc_b <= dma_rd_data;
                    if (dma_done) begin
                        d_err <= d_err || dma_err;
                        state <= S_ACCEPT;
                    end
                end

                S_ACCEPT: begin
                    if (d_err) begin
                        state <= S_REFUSE;
                        // The prompt is not in memory the device can read.
                        r_tag <= 32'd0;
                        r_ctx <= 16'd0;
                        r_n <= d_seq;
                        r_status <= ST_BAD;
                        ev_code <= F_BAD_CRC;
                    end else if (!slot_usable[d_slot]) begin
                        // The slot went away while the prompt was read.
                        state <= S_REFUSE;
                        r_tag <= d[2];
                        r_ctx <= ctx16;
                        r_n <= 32'd0;
                        r_status <= ST_NOT_READY;
                        ev_code <= F_NOT_READY;
                    end else begin
                        acc_valid[d_slot] <= 1'b1;
                        acc_ctx <= ctx_local;
                        acc_tag <= d[2];
                        acc_seed <= {d[13], d[12]};
                        acc_max <= d[7][15:0];
                        acc_stop <= d[14];
                        acc_out <= output_addr[DAW-1:0];
                        acc_stream <= d[1][24];
                        acc_prompt <= prompt_addr[DAW-1:0];
                        acc_len <= d[6][15:0];
                        state <= S_HAND;
                    end
                end

                S_HAND: begin
                    if ((acc_valid & acc_ready) != {SLOTS{1'b0}}) begin
                        acc_valid <= {SLOTS{1'b0}};
                        ev_submitted <= 1'b1;
                        state <= S_IDLE;
                    end
                end

                S_REFUSE: begin
                    // Every refusal is an error and an event, with its code.
                    if (!ref_valid) begin
                        ref_valid <= 1'b1;
                        ev_bump <= 1'b1;
                        ev_err <= 1'b1;
                        ev_fault <= 1'b1;
                    end else if (ref_ready) begin
                        ref_valid <= 1'b0;
                        state <= S_IDLE;
                    end
                end

                default: state <= S_IDLE;
            endcase
        end
    end
`ifdef FORMAL
    // ---- formal properties (scripts/formal, this module alone) ------------
    // Every input is free: the host's doorbell, the DMA's answers, the
    // slots. What the host keeps of section 5 is monitored, not assumed.
    reg f_past_valid = 1'b0;
    always @(posedge clk)
        f_past_valid <= 1'b1;
    always @(*)
        if (!f_past_valid)
            assume(rst);

    // The host's doorbell since the rings last started: SQ_TAIL zero as
    // ENABLE rose (flush), then only forward and never more than SQ_ENTRIES
    // ahead of SQ_HEAD (the host counts free entries from completions, so
    // its SQ_HEAD is at most stale, never ahead); SQ_ENTRIES unchanged.
    reg [31:0] f_tail, f_entries;
    reg        f_host_ok = 1'b0;
    always @(posedge clk) begin
        f_tail <= sq_tail;
        f_entries <= sq_entries;
    end
    wire f_rules_now = sq_entries == f_entries &&
                       (sq_tail == f_tail || (sq_tail - sq_head >= f_tail - sq_head &&
                                              sq_tail - sq_head <= sq_entries));
    wire f_ok = f_host_ok && f_rules_now;
    always @(posedge clk)
        if (rst)
            f_host_ok <= 1'b0;
        else if (flush)
            f_host_ok <= sq_tail == 32'd0 && sq_entries >= 32'd2;
        else
            f_host_ok <= f_ok;

    always @(posedge clk)
        if (f_past_valid && !$past(rst) && !$past(flush)) begin
            // A descriptor is read only if the host made it available,
            // whatever the host writes: SQ_TAIL - SQ_HEAD in 1..SQ_ENTRIES.
            if (state == S_READ && $past(state) == S_IDLE)
                a_reads_only_submitted: assert($past(pending) != 32'd0 &&
                                               $past(pending) <= $past(sq_entries));
            // SQ_HEAD moves only by one, at the end of a descriptor's read.
            if (sq_head != $past(sq_head))
                a_head_steps: assert($past(state) == S_READ && $past(dma_done) &&
                                     sq_head == $past(sq_head) + 32'd1);
        end
    always @(posedge clk)
        if (f_past_valid && ($past(rst) || $past(flush)))
            // ENABLE's either edge starts the ring afresh.
            a_head_restarts: assert(sq_head == 32'd0 && state == S_IDLE);

    always @(*)
        if (f_past_valid && !rst && f_ok) begin
            // SQ_HEAD never passes SQ_TAIL.
            a_head_behind_tail: assert(pending <= sq_entries);
            // A read under way keeps the entry it started for (helper).
            if (state == S_READ)
                h_read_has_one: assert(pending != 32'd0);
        end
    always @(*)
        if (f_past_valid && !rst)
            h_state: assert(state <= S_REFUSE);

    // Reachability (scripts/formal): a descriptor read and handed to its
    // slot, from reset; negated, what ABC's search asserts.
    (* keep *) wire f_reach = f_past_valid && !rst && state == S_HAND &&
                              (acc_valid & acc_ready) != {SLOTS{1'b0}};
    (* keep *) wire f_unreached = !f_reach;
`endif
endmodule

`default_nettype wire
