// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_step: one slot's step port. It takes the step fabric_sched chose,
// with the context's draw already computed (fabric_ctx), hands it to the
// slot across the partition boundary, waits for the token, writes it to the
// request's output in DDR, folds it into the output CRC, and posts what the
// contract asks (section 4): a DONE when the request ends (stop token or
// max_tokens), a TOKENS entry otherwise when it streams. One step at a
// time per slot; the other slots' steps, the ring fetch and the completion
// queue go on meanwhile.
//
// Its side of the partition boundary is registered: a register slice on
// the step's channel out and on the answer's channel in, both emptied while
// the slot is decoupled; the step's also once no answer is awaited (an
// answer, or a step given up, ends the request). An answer nobody asked
// for is taken and dropped (`stray`: the slot is torn).
//
// A step the engine answers with a failed table read ends its request as
// a table read fault (8), and the slot is in error (table_fault). A step
// the slot never answers ends its request as a decoder fault (6):
// cut off by the decoupler (the slot comes up torn), or unanswered for
// WATCHDOG fabric cycles (the slot is hung). `hold` pauses the watchdog
// while a request waits at a gate that is not the slot's (the
// co-simulation's pacing; tied low on a board), so it counts fabric
// cycles only.

`default_nettype none

module fabric_step #(
    parameter integer SLOT = 0,
    parameter integer CPS = 8,
    parameter integer DAW = 40,
    parameter integer WATCHDOG = 65536,
    // Derived from the parameters above: leave them be.
    parameter integer LW = (CPS > 1) ? $clog2(CPS) : 1,
    parameter integer EW = 168,
    parameter integer REQ_W = 117,
    parameter integer RSP_W = 34
) (
    input  wire           clk,
    input  wire           rst,
    input  wire           flush,
    input  wire           usable,
    input  wire           decoupled,
    input  wire           hold,
    input  wire [31:0]    us_now,

    input  wire           pk_valid,
    input  wire [LW-1:0]  pk_idx,
    input  wire [CPS-1:0] can_step,
    output reg            taken,
    output reg  [LW-1:0]  idx,
    output wire           held,

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

    output reg            up_valid,
    output reg  [31:0]    up_token,
    output reg  [31:0]    up_crc,
    output reg  [15:0]    up_produced,
    output reg            fr_valid,

    // The slot's request and answer channels, across the boundary.
    output wire             slot_req_valid,
    input  wire             slot_req_ready,
    output wire [REQ_W-1:0] slot_req_data,     // a, b, draw, greedy, inv_t
    input  wire             slot_rsp_valid,
    output wire             slot_rsp_ready,
    input  wire [RSP_W-1:0] slot_rsp_data,     // token, fault code

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
    localparam [1:0] RF_READ = 2'd2;
    localparam [7:0] ST_OK = 8'd0, ST_FAULT = 8'd4;
    localparam [7:0] K_TOKENS = 8'd1, K_DONE = 8'd2;
    localparam [7:0] FIN_NONE = 8'd0, FIN_LENGTH = 8'd1, FIN_STOP = 8'd2;
    localparam integer CTX_FIRST = SLOT * CPS;
    localparam [15:0] CTX0 = CTX_FIRST[15:0];

    localparam [2:0]
        S_IDLE  = 3'd0,
        S_REQ   = 3'd1,    // the request offered to the slot
        S_WAIT  = 3'd2,    // taken; the answer awaited
        S_TOK   = 3'd3,    // the token's write asked for
        S_TWAIT = 3'd4,    // the token's write under way
        S_PUSH  = 3'd5;    // a completion entry offered
    reg [2:0]  state;
    reg [31:0] watch;
    reg [31:0] token;
    // The entry being offered, and whether it ends the request.
    reg [7:0]  e_kind, e_status, e_fin;
    reg [31:0] e_n, e_crc;
    reg        e_final;
    reg        dropped;              // the rings restarted under the step
    reg [7:0]  code;                 // the fault an ending request reports

    assign ev_code = code;
    assign dma_wdata = token;
    assign rd_idx = (state == S_IDLE) ? pk_idx : idx;
    assign held = state != S_IDLE;
    assign outstanding = state == S_REQ || state == S_WAIT;

    // ---- the boundary, this side -----------------------------------------------
    reg         req_valid, rsp_ready;
    reg  [31:0] req_a, req_b, req_draw;
    reg         req_greedy;
    reg  [19:0] req_inv_t;
    wire        req_ready, rsp_valid;
    wire [RSP_W-1:0] rsp;
    wire [31:0] rsp_token = rsp[33:2];
    wire [1:0]  rsp_fault = rsp[1:0];

    fabric_skid #(.W(REQ_W)) req_out (
        .clk(clk), .rst(rst || decoupled || !outstanding),
        .s_valid(req_valid), .s_ready(req_ready),
        .s_data({req_a, req_b, req_draw, req_greedy, req_inv_t}),
        .m_valid(slot_req_valid), .m_ready(slot_req_ready), .m_data(slot_req_data)
    );
    fabric_skid #(.W(RSP_W)) rsp_in (
        .clk(clk), .rst(rst || decoupled),
        .s_valid(slot_rsp_valid), .s_ready(slot_rsp_ready), .s_data(slot_rsp_data),
        .m_valid(rsp_valid), .m_ready(rsp_ready || !outstanding), .m_data(rsp)
    );
    assign idle = !outstanding && !slot_req_valid;
    assign stray = rsp_valid && !outstanding;
    assign cq_entry = {rd_tag, CTX0 + {{(16 - LW){1'b0}}, idx}, e_kind, e_status, e_n, e_crc,
                       e_final ? us_now - rd_us : 32'd0, e_fin};

    wire [31:0] next_crc = crc32_word(rd_crc, token);
    wire [15:0] next_produced = rd_produced + 16'd1;
    wire        expired = watch == WATCHDOG;

    // A step given up: its request ends with a fault, unless the rings
    // started afresh meanwhile (its context is gone).
    task give_up;
        begin
            code <= F_DECODER;
            if (dropped || flush)
                state <= S_IDLE;
            else
                fail();
        end
    endtask

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
            req_valid <= 1'b0;
            rsp_ready <= 1'b0;
            dma_valid <= 1'b0;
            cq_valid <= 1'b0;
            dropped <= 1'b0;
        end else if (flush && !outstanding) begin
            // The rings start afresh (ENABLE): the context is gone. A
            // token write under way ends at the DMA, unheard.
            state <= S_IDLE;
            dma_valid <= 1'b0;
            cq_valid <= 1'b0;
        end else begin
            // A step out with the slot is seen through to its answer even
            // as the rings start afresh, so that a restarted host finds the
            // slot as it was, not torn by a late answer; its context is
            // gone, so the answer is dropped.
            if (flush)
                dropped <= 1'b1;
            case (state)
                S_IDLE: begin
                    dropped <= 1'b0;
                    if (pk_valid && can_step[pk_idx] && usable && !flush) begin
                        taken <= 1'b1;
                        idx <= pk_idx;
                        req_valid <= 1'b1;
                        req_a <= rd_a;
                        req_b <= rd_b;
                        req_draw <= rd_draw;
                        req_greedy <= rd_greedy;
                        req_inv_t <= rd_inv_t;
                        watch <= 32'd0;
                        state <= S_REQ;
                    end
                end

                S_REQ: begin
                    if (decoupled || expired) begin
                        // Cut off before the slot took it, or never taken.
                        req_valid <= 1'b0;
                        hung <= !decoupled;
                        give_up();
                    end else if (req_ready) begin
                        req_valid <= 1'b0;
                        rsp_ready <= 1'b1;
                        if (!hold)
                            watch <= watch + 32'd1;
                        state <= S_WAIT;
                    end else if (!hold) begin
                        watch <= watch + 32'd1;
                    end
                end

                S_WAIT: begin
                    if (rsp_valid) begin
                        rsp_ready <= 1'b0;
                        if (dropped || flush) begin
                            state <= S_IDLE;
                        end else if (rsp_fault != 2'd0) begin
                            table_fault <= rsp_fault == RF_READ;
                            code <= (rsp_fault == RF_READ) ? F_TABLE_READ : F_DECODER;
                            fail();
                        end else begin
                            token <= rsp_token;
                            dma_valid <= 1'b1;
                            dma_addr <= rd_out + {{(DAW - 18){1'b0}}, rd_produced, 2'b00};
                            state <= S_TOK;
                        end
                    end else if (decoupled || expired) begin
                        // Cut off with the step outstanding, or never
                        // answered: the step is lost, and so is the request.
                        rsp_ready <= 1'b0;
                        hung <= !decoupled;
                        give_up();
                    end else if (!hold) begin
                        watch <= watch + 32'd1;
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
                        state <= S_IDLE;
                    end
                end

                default: state <= S_IDLE;
            endcase
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
                a_idle_offers_nothing: assert(!slot_req_valid && !rsp_ready && !req_valid);
            // A step is offered and awaited only in its states (helpers).
            h_req_only_offering: assert(!req_valid || state == S_REQ);
            h_rsp_only_waiting: assert(!rsp_ready || state == S_WAIT);
            // The watchdog: a step is never out with the slot for more than
            // WATCHDOG cycles the gate did not hold.
            if (outstanding)
                a_watchdog_bounds_a_step: assert(watch <= WATCHDOG);
            h_state: assert(state <= S_PUSH);
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
