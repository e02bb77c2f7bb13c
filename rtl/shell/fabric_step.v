// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_step: one slot's step port. It hands the slot the steps
// fabric_sched chooses, each context's draw already computed (fabric_ctx),
// several at once: every context with a lane may have a step out with the
// slot, so an engine that batches (the transformer, contract section 10)
// finds every lane's step waiting and serves them in one pass over its
// weights. The answers come back tagged with their lane, in any order;
// each is taken in turn: its token written to the request's output in
// DDR, folded into the output CRC, and what the contract asks posted
// (section 4): a DONE when the request ends (stop token, max_tokens, or
// the engine's context full), a TOKENS entry otherwise when it streams.
// The ring fetch, the completion queue and the other slots' steps go on
// meanwhile.
//
// A step names its lane (the engine's context: fabric_sched gives the
// numbers, below LANES, so an engine's keys and values need room for
// LANES contexts only), whether it starts a sequence, the prompt's
// address and length in DDR, the trigram engine's two tokens, the draw
// and the temperature. The layout of both channels across the boundary
// is in fabric_slot.v.
//
// Its side of the partition boundary is registered: a register slice on
// the step's channel out and on the answer's channel in, both emptied while
// the slot is decoupled; the step's also when the steps out are given up.
// An answer for a lane with no step out is taken and dropped (`stray`: the
// slot is torn).
//
// A step the engine answers with a failed table read ends its request as
// a table read fault (8), and the slot is in error (table_fault); one it
// answers with a prompt token outside the vocabulary, as a decoder fault
// (6); one it answers with its context full, as at max_tokens (finish
// length). Steps the slot never answers end their requests as decoder
// faults (6): cut off by the decoupler (the slot comes up torn), or left
// with steps out and no sign of life for WATCHDOG fabric cycles (the slot
// is hung). A sign of life is an answer or a beat of the engine's reads
// (`progress`): a transformer's first step feeds the whole prompt before
// it answers, a round of the weights for each token, so an answer alone
// says too little. `hold` pauses the watchdog while a step waits at a
// gate that is not the slot's (the co-simulation's pacing; tied low on a
// board), so it counts fabric cycles only.

`default_nettype none

module fabric_step #(
    parameter integer SLOT = 0,
    parameter integer CPS = 8,
    parameter integer DAW = 40,
    parameter integer WATCHDOG = 65536,
    // Derived from the parameters above: leave them be.
    parameter integer LW = (CPS > 1) ? $clog2(CPS) : 1,
    parameter integer EW = 168,
    parameter integer REQ_W = 142 + DAW,
    parameter integer RSP_W = 43
) (
    input  wire           clk,
    input  wire           rst,
    input  wire           flush,
    input  wire           usable,
    input  wire           decoupled,
    input  wire           hold,
    input  wire           progress,    // the engine's reads moved this cycle
    input  wire [31:0]    us_now,

    input  wire           pk_valid,
    input  wire [LW-1:0]  pk_idx,
    input  wire [LW-1:0]  pk_lane,
    input  wire [CPS-1:0] can_step,
    output reg            taken,
    output reg  [LW-1:0]  taken_idx,
    output reg  [LW-1:0]  idx,         // the context whose answer is handled
    output wire [CPS-1:0] held,        // contexts with a step out, or handled
    output reg  [CPS-1:0] lane_out,    // lanes with a step out

    output wire [LW-1:0]  rd_idx,
    input  wire [31:0]    rd_tag,
    input  wire [31:0]    rd_a,
    input  wire [31:0]    rd_b,
    input  wire [31:0]    rd_draw,
    input  wire           rd_greedy,
    input  wire [19:0]    rd_inv_t,
    input  wire [15:0]    rd_produced,
    input  wire [15:0]    rd_max,
    input  wire [31:0]    rd_stop,
    input  wire [DAW-1:0] rd_out,
    input  wire [31:0]    rd_crc,
    input  wire           rd_stream,
    input  wire [31:0]    rd_us,
    input  wire           rd_first,
    input  wire [DAW-1:0] rd_prompt,
    input  wire [15:0]    rd_len,

    output reg            up_valid,
    output reg  [31:0]    up_token,
    output reg  [31:0]    up_crc,
    output reg  [15:0]    up_produced,
    output reg            fr_valid,

    // The slot's request and answer channels, across the boundary.
    output wire             slot_req_valid,
    input  wire             slot_req_ready,
    output wire [REQ_W-1:0] slot_req_data,
    input  wire             slot_rsp_valid,
    output wire             slot_rsp_ready,
    input  wire [RSP_W-1:0] slot_rsp_data,

    // Its share of the HP port: one-word writes.
    output reg            dma_valid,
    input  wire           dma_ready,
    output reg  [DAW-1:0] dma_addr,
    output wire [31:0]    dma_wdata,
    input  wire           dma_done,
    input  wire           dma_err,

    output reg            cq_valid,
    input  wire           cq_ready,
    output wire [EW-1:0]  cq_entry,

    output reg            ev_bump,
    output reg            ev_err,
    output reg            ev_fault,
    output wire [7:0]     ev_code,
    output reg            ev_completed,
    output reg            ev_token,
    output reg            hung,
    output reg            table_fault,  // the engine's read of its table failed
    output wire           outstanding,  // a step given to the slot, unanswered
    output wire           idle,         // nothing out with the slot (SLOT_SHUTDOWN)
    output wire           stray         // an answer nobody asked for, dropped
);
`include "fabric_crc32.vh"

    localparam [7:0] F_DECODER = 8'd6, F_TABLE_READ = 8'd8;
    localparam [2:0] RF_NONE = 3'd0, RF_READ = 3'd2, RF_FULL = 3'd3;
    localparam [7:0] ST_OK = 8'd0, ST_FAULT = 8'd4;
    localparam [7:0] K_TOKENS = 8'd1, K_DONE = 8'd2;
    localparam [7:0] FIN_NONE = 8'd0, FIN_LENGTH = 8'd1, FIN_STOP = 8'd2;
    localparam integer CTX_FIRST = SLOT * CPS;
    localparam [15:0] CTX0 = CTX_FIRST[15:0];

    localparam [2:0]
        S_IDLE  = 3'd0,    // answers taken, steps handed over
        S_ANS   = 3'd1,    // an answer taken; its context read
        S_TOK   = 3'd2,    // the token's write asked for
        S_TWAIT = 3'd3,    // the token's write under way
        S_PUSH  = 3'd4,    // a completion entry offered
        S_LOST  = 3'd5,    // the steps out given up, one request at a time
        S_FAIL  = 3'd6;    // one of them; its context read
    reg [2:0]  state;
    reg [31:0] watch;
    reg [31:0] token;
    reg [2:0]  fault;
    // The entry being offered, and whether it ends the request.
    reg [7:0]  e_kind, e_status, e_fin;
    reg [31:0] e_n, e_crc;
    reg        e_final;
    reg [7:0]  code;                 // the fault an ending request reports
    reg        was_lost;             // S_PUSH goes back to S_LOST
    // Lanes with a step out (lane_out, an output); those whose step has
    // crossed to the slot; those whose answer is to be dropped (the rings
    // started afresh under them); each lane's context, and so the contexts
    // with a step out.
    reg [CPS-1:0] lane_sent;
    reg [CPS-1:0] drop;
    reg [LW-1:0]  ctx_of [0:CPS-1];
    reg [CPS-1:0] out;
    integer       l;
    always @(*) begin
        out = {CPS{1'b0}};
        for (l = 0; l < CPS; l = l + 1)
            if (lane_out[l])
                out[ctx_of[l]] = 1'b1;
    end
    wire          any_out = lane_out != {CPS{1'b0}};

    assign ev_code = code;
    assign dma_wdata = token;
    assign rd_idx = (state == S_IDLE) ? pk_idx : idx;
    assign held = out | ((state == S_IDLE) ? {CPS{1'b0}} : ({{(CPS - 1){1'b0}}, 1'b1} << idx));
    assign outstanding = any_out;

    // ---- the boundary, this side -----------------------------------------------
    wire             req_ready, rsp_valid;
    wire [RSP_W-1:0] rsp;
    wire [7:0]       rsp_lane = rsp[42:35];
    wire [31:0]      rsp_token = rsp[34:3];
    wire [2:0]       rsp_fault = rsp[2:0];
    // An answer is for a lane whose step the slot has taken; any other
    // (one before its step crossed, say) is stray.
    wire             lane_ok = {24'd0, rsp_lane} < CPS && lane_sent[rsp_lane[LW-1:0]];
    wire [LW-1:0]    sent_lane = slot_req_data[REQ_W-8 +: LW];
    wire             sent = slot_req_valid && slot_req_ready;
    wire             unused_sent_lane = ^slot_req_data[REQ_W-1 -: 8];
    wire [LW-1:0]    rsp_ctx = ctx_of[rsp_lane[LW-1:0]];
    wire             unused_rsp_lane = ^rsp_lane;
    wire             expired = watch == WATCHDOG;
    wire             give_up = any_out && (decoupled || expired);
    // An answer taken; a step handed over (only into an empty slice, so
    // the port never waits on the slot with an answer to take, and a step
    // crosses before the next is offered).
    wire             ans = state == S_IDLE && rsp_valid && lane_ok && !give_up;
    wire             issue = state == S_IDLE && !give_up && !(rsp_valid && lane_ok) &&
                             pk_valid && can_step[pk_idx] && !out[pk_idx] && !lane_out[pk_lane] &&
                             usable && !flush && req_ready && !slot_req_valid;
    assign stray = rsp_valid && !lane_ok;

    fabric_skid #(.W(REQ_W)) req_out (
        .clk(clk), .rst(rst || decoupled || state == S_LOST),
        .s_valid(issue), .s_ready(req_ready),
        .s_data({{(8 - LW){1'b0}}, pk_lane, rd_first, rd_prompt, rd_len, rd_a, rd_b, rd_draw,
                 rd_greedy, rd_inv_t}),
        .m_valid(slot_req_valid), .m_ready(slot_req_ready), .m_data(slot_req_data)
    );
    fabric_skid #(.W(RSP_W)) rsp_in (
        .clk(clk), .rst(rst || decoupled),
        .s_valid(slot_rsp_valid), .s_ready(slot_rsp_ready), .s_data(slot_rsp_data),
        .m_valid(rsp_valid), .m_ready(ans || stray), .m_data(rsp)
    );
    assign idle = !any_out && !slot_req_valid;
    assign cq_entry = {rd_tag, CTX0 + {{(16 - LW){1'b0}}, idx}, e_kind, e_status, e_n, e_crc,
                       e_final ? us_now - rd_us : 32'd0, e_fin};

    wire [31:0] next_crc = crc32_word(rd_crc, token);
    wire [15:0] next_produced = rd_produced + 16'd1;
    wire [LW:0] lost_pick = first(lane_out);
    wire [LW-1:0] lost_lane = lost_pick[LW-1:0];

    function [LW:0] first(input [CPS-1:0] v);
        integer k;
        begin
            first = {1'b0, {LW{1'b0}}};
            for (k = CPS - 1; k >= 0; k = k - 1)
                if (v[k])
                    first = {1'b1, k[LW-1:0]};
        end
    endfunction

    // Ends the request with a fault: its output so far, its CRC.
    task fail;
        begin
            e_kind <= K_DONE;
            e_status <= ST_FAULT;
            e_fin <= FIN_NONE;
            e_n <= {16'd0, rd_produced};
            e_crc <= ~rd_crc;
            e_final <= 1'b1;
            ev_bump <= 1'b1;
            ev_fault <= 1'b1;
            state <= S_PUSH;
        end
    endtask

    // Ends the request as at max_tokens: the engine's context is full.
    task full;
        begin
            e_kind <= K_DONE;
            e_status <= ST_OK;
            e_fin <= FIN_LENGTH;
            e_n <= {16'd0, rd_produced};
            e_crc <= ~rd_crc;
            e_final <= 1'b1;
            state <= S_PUSH;
        end
    endtask

    always @(posedge clk) begin
        taken <= 1'b0;
        up_valid <= 1'b0;
        fr_valid <= 1'b0;
        ev_bump <= 1'b0;
        ev_err <= 1'b0;
        ev_fault <= 1'b0;
        ev_completed <= 1'b0;
        ev_token <= 1'b0;
        hung <= 1'b0;
        table_fault <= 1'b0;
        if (rst) begin
            state <= S_IDLE;
            dma_valid <= 1'b0;
            cq_valid <= 1'b0;
            drop <= {CPS{1'b0}};
            lane_out <= {CPS{1'b0}};
            lane_sent <= {CPS{1'b0}};
            was_lost <= 1'b0;
            watch <= 32'd0;
        end else begin
            // The watchdog: cycles with steps out and no sign of life.
            if (!any_out || ans || progress)
                watch <= 32'd0;
            else if (!hold && !expired)
                watch <= watch + 32'd1;

            // A step out with the slot is seen through to its answer even
            // as the rings start afresh, so that a restarted host finds the
            // slot as it was, not torn by a late answer; its context is
            // gone, so the answer is dropped.
            if (flush)
                drop <= lane_out;

            if (sent)
                lane_sent[sent_lane] <= 1'b1;
            if (issue) begin
                taken <= 1'b1;
                taken_idx <= pk_idx;
                lane_out[pk_lane] <= 1'b1;
                ctx_of[pk_lane] <= pk_idx;
            end

            if (flush && state != S_IDLE && state != S_LOST) begin
                // The rings start afresh (ENABLE): the context is gone. A
                // token write under way ends at the DMA, unheard; steps
                // being given up go on being given up (as dropped).
                state <= was_lost ? S_LOST : S_IDLE;
                dma_valid <= 1'b0;
                cq_valid <= 1'b0;
            end else begin
                case (state)
                    S_IDLE: begin
                        if (give_up) begin
                            // Cut off with steps out, or no sign of life:
                            // the steps are lost, and so are their requests.
                            hung <= !decoupled;
                            state <= S_LOST;
                        end else if (ans) begin
                            drop[rsp_lane[LW-1:0]] <= 1'b0;
                            lane_out[rsp_lane[LW-1:0]] <= 1'b0;
                            lane_sent[rsp_lane[LW-1:0]] <= 1'b0;
                            idx <= rsp_ctx;
                            token <= rsp_token;
                            fault <= rsp_fault;
                            if (!drop[rsp_lane[LW-1:0]] && !flush)
                                state <= S_ANS;
                        end
                    end

                    S_ANS: begin
                        if (fault == RF_FULL) begin
                            full();
                        end else if (fault != RF_NONE) begin
                            table_fault <= fault == RF_READ;
                            code <= (fault == RF_READ) ? F_TABLE_READ : F_DECODER;
                            fail();
                        end else begin
                            dma_valid <= 1'b1;
                            dma_addr <= rd_out + {{(DAW - 18){1'b0}}, rd_produced, 2'b00};
                            state <= S_TOK;
                        end
                    end

                    S_TOK: begin
                        if (dma_ready) begin
                            dma_valid <= 1'b0;
                            state <= S_TWAIT;
                        end
                    end

                    S_TWAIT: begin
                        if (dma_done) begin
                            if (dma_err) begin
                                // The output is not in memory the device can write.
                                code <= F_DECODER;
                                fail();
                            end else begin
                                up_valid <= 1'b1;
                                up_token <= token;
                                up_crc <= next_crc;
                                up_produced <= next_produced;
                                ev_token <= 1'b1;
                                e_n <= {16'd0, next_produced};
                                e_status <= ST_OK;
                                if (token == rd_stop || next_produced >= rd_max) begin
                                    e_kind <= K_DONE;
                                    e_fin <= (token == rd_stop) ? FIN_STOP : FIN_LENGTH;
                                    e_crc <= ~next_crc;
                                    e_final <= 1'b1;
                                    state <= S_PUSH;
                                end else if (rd_stream) begin
                                    e_kind <= K_TOKENS;
                                    e_fin <= FIN_NONE;
                                    e_crc <= 32'd0;
                                    e_final <= 1'b0;
                                    state <= S_PUSH;
                                end else begin
                                    state <= S_IDLE;
                                end
                            end
                        end
                    end

                    S_PUSH: begin
                        if (!cq_valid) begin
                            cq_valid <= 1'b1;
                        end else if (cq_ready) begin
                            cq_valid <= 1'b0;
                            fr_valid <= e_final;
                            ev_completed <= e_final && e_status == ST_OK;
                            ev_err <= e_final && e_status != ST_OK;
                            state <= was_lost ? S_LOST : S_IDLE;
                        end
                    end

                    S_LOST: begin
                        // Each step out ends its request as a decoder
                        // fault, unless the rings started afresh meanwhile
                        // (its context is gone).
                        was_lost <= 1'b1;
                        lane_sent <= {CPS{1'b0}};
                        if (!lost_pick[LW]) begin
                            was_lost <= 1'b0;
                            state <= S_IDLE;
                        end else begin
                            idx <= ctx_of[lost_lane];
                            lane_out[lost_lane] <= 1'b0;
                            drop[lost_lane] <= 1'b0;
                            code <= F_DECODER;
                            if (!drop[lost_lane] && !flush)
                                state <= S_FAIL;
                        end
                    end

                    S_FAIL: fail();

                    default: state <= S_IDLE;
                endcase
            end
        end
    end
`ifdef FORMAL
    // ---- formal properties (scripts/formal, this module alone) ------------
    // Every input is free: the scheduler, the context table, the slot's
    // side of the boundary (whatever a half-reprogrammed slot drives), the
    // DMA's answers, the completion queue.
    reg f_past_valid = 1'b0;
    always @(posedge clk)
        f_past_valid <= 1'b1;
    always @(*)
        if (!f_past_valid)
            assume(rst);

    always @(*)
        if (f_past_valid && !rst) begin
            // SLOT_SHUTDOWN: nothing out with the slot when idle: no step
            // offered across the boundary, no answer awaited.
            if (idle)
                a_idle_offers_nothing: assert(!slot_req_valid && lane_out == {CPS{1'b0}});
            // A step is offered only while it is out (helpers).
            h_offered_is_out: assert(!slot_req_valid || any_out);
            h_lost_only_giving_up: assert(!was_lost || state == S_LOST || state == S_FAIL ||
                                          state == S_PUSH);
            h_lanes_sent: assert((lane_sent & ~lane_out) == {CPS{1'b0}});
            // The step offered is out, on a lane not yet sent; nothing
            // waits behind it.
            h_offered_unsent: assert(!slot_req_valid ||
                                     (lane_out[sent_lane] && !lane_sent[sent_lane]));
            h_one_offered: assert(req_ready);
            // The watchdog: steps are never out with the slot, without a
            // sign of life, for more than WATCHDOG cycles the gate did not
            // hold.
            a_watchdog_bounds_a_step: assert(watch <= WATCHDOG);
            h_state: assert(state <= S_FAIL);
        end

    // Once idle with the slot unusable (quiesced), it stays idle: no step
    // starts (SLOT_SHUTDOWN stays 0x0F while QUIESCE stays set).
    always @(posedge clk)
        if (f_past_valid && !$past(rst) && !rst && $past(idle) && !$past(usable))
            a_quiesced_stays_idle: assert(idle);

    // Reachability (scripts/formal): a token answered and written, then
    // the port quiesced with nothing out with the slot.
    reg f_stepped = 1'b0;
    always @(posedge clk)
        f_stepped <= !rst && (f_stepped || (state == S_TWAIT && dma_done && !dma_err));
    (* keep *) wire f_reach = f_past_valid && !rst && f_stepped && idle && !usable;
    (* keep *) wire f_unreached = !f_reach;
`endif
endmodule

`default_nettype wire
