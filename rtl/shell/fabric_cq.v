// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_cq: the completion queue (docs/fabric-contract.md sections 4-5).
// Entries from the shell's parts (the ring fetch's refusals, each slot's
// step port and its ends) wait on chip, QD of them, taken one a cycle in
// turn; each is posted to the completion ring once the ring has room
// (CQ_TAIL - CQ_HEAD below CQ_ENTRIES), its CRC taken a word a cycle, so a
// slow host loses none. While the queue is full its producers wait.
//
// An entry, as the parts hand it over (EW = 168 bits, high to low): tag 32,
// ctx 16, kind 8, status 8, n_tokens 32, crc 32, fabric_us 32, finish 8.

`default_nettype none

module fabric_cq #(
    parameter integer P = 3,              // producers
    parameter integer DAW = 40,
    parameter integer QD = 8,             // entries held on chip
    // Derived from the parameters above: leave them be.
    parameter integer EW = 168
) (
    input  wire            clk,
    input  wire            rst,
    input  wire            flush,
    input  wire            enabled,

    input  wire [DAW-1:0]  cq_addr,
    input  wire [11:0]     cq_mask,
    input  wire [31:0]     cq_entries,
    input  wire [31:0]     cq_head,
    output reg  [31:0]     cq_tail,

    input  wire [P-1:0]    in_valid,
    output wire [P-1:0]    in_ready,
    input  wire [P*EW-1:0] in_entry,

    // Its share of the HP port (fabric_dma_arb): eight-word writes.
    output reg             dma_valid,
    input  wire            dma_ready,
    output reg  [DAW-1:0]  dma_addr,
    output wire [255:0]    dma_wdata,
    input  wire            dma_done,
    input  wire            dma_err,

    output reg             ev_bump,
    output reg             ev_err,
    output reg             ev_fault,
    output wire [7:0]      ev_code
);
`include "fabric_crc32.vh"

    localparam integer PW = (P > 1) ? $clog2(P) : 1;
    localparam integer QW = (QD > 1) ? $clog2(QD) : 1;
    localparam [7:0] F_RING = 8'd5;

    assign ev_code = F_RING;

    reg [EW-1:0] fifo [0:QD-1];
    reg [QW-1:0] wr, rd;
    reg [QW:0]   count;
    reg [PW-1:0] last;                    // the producer served last

    // ---- producers, in turn -----------------------------------------------
    function [PW:0] next(input [P-1:0] req, input [PW-1:0] after);
        integer k;
        reg [PW:0] c;
        begin
            next = {1'b0, {PW{1'b0}}};
            for (k = P; k >= 1; k = k - 1) begin
                c = {1'b0, after} + k[PW:0];
                if (c >= P[PW:0])
                    c = c - P[PW:0];
                if (req[c[PW-1:0]])
                    next = {1'b1, c[PW-1:0]};
            end
        end
    endfunction

    // The next producer is chosen a cycle ahead (a registered arbiter): an
    // entry goes from the chosen producer's register to the queue through
    // a multiplexer only. A producer holds its entry until taken, so the
    // choice is still good a cycle later (it is checked again).
    reg  [PW:0] pick;
    wire        full = count == QD[QW:0];
    wire        push = pick[PW] && in_valid[pick[PW-1:0]] && !full && !flush;

    genvar g;
    generate
        for (g = 0; g < P; g = g + 1) begin : ready
            assign in_ready[g] = push && pick[PW-1:0] == g[PW-1:0];
        end
    endgenerate

    // ---- posting -------------------------------------------------------------
    localparam [1:0] Q_IDLE = 2'd0, Q_CRC = 2'd1, Q_WRITE = 2'd2, Q_WAIT = 2'd3;
    reg [1:0]    state;
    reg [2:0]    word;
    reg [31:0]   crc;
    reg [255:0]  entry;                   // the eight words, word 0 lowest

    wire [EW-1:0] head = fifo[rd];
    wire          room = (cq_tail - cq_head) < cq_entries;
    wire          pop = state == Q_WAIT && dma_done;

    assign dma_wdata = {~crc, entry[223:0]};

    always @(posedge clk) begin
        ev_bump <= 1'b0;
        ev_err <= 1'b0;
        ev_fault <= 1'b0;
        if (rst || flush) begin
            wr <= {QW{1'b0}};
            rd <= {QW{1'b0}};
            count <= {(QW + 1){1'b0}};
            last <= {PW{1'b0}};
            pick <= {1'b0, {PW{1'b0}}};
            cq_tail <= 32'd0;
            state <= Q_IDLE;
            dma_valid <= 1'b0;
        end else begin
            // The next choice: after the producer just taken, in turn.
            pick <= next(in_valid & ~(push ? {{(P - 1){1'b0}}, 1'b1} << pick[PW-1:0] : {P{1'b0}}),
                         push ? pick[PW-1:0] : last);
            if (push) begin
                fifo[wr] <= in_entry[EW * pick[PW-1:0] +: EW];
                wr <= wr + 1'b1;
                last <= pick[PW-1:0];
            end
            count <= count + {{QW{1'b0}}, push} - {{QW{1'b0}}, pop};

            case (state)
                Q_IDLE: begin
                    if (enabled && count != {(QW + 1){1'b0}} && room) begin
                        // seq, tag, {status, kind, ctx}, n, crc, us, finish.
                        entry <= {32'd0, 24'd0, head[7:0], head[39:8], head[71:40],
                                  head[103:72], head[111:104], head[119:112], head[135:120],
                                  head[167:136], cq_tail};
                        crc <= 32'hFFFF_FFFF;
                        word <= 3'd0;
                        state <= Q_CRC;
                    end
                end
                Q_CRC: begin
                    crc <= crc32_word(crc, entry[32 * word +: 32]);
                    word <= word + 3'd1;
                    if (word == 3'd6) begin
                        dma_valid <= 1'b1;
                        dma_addr <= cq_addr + {{(DAW - 17){1'b0}}, cq_tail[11:0] & cq_mask, 5'd0};
                        state <= Q_WRITE;
                    end
                end
                Q_WRITE: begin
                    if (dma_ready) begin
                        dma_valid <= 1'b0;
                        state <= Q_WAIT;
                    end
                end
                default: begin
                    if (dma_done) begin
                        rd <= rd + 1'b1;
                        cq_tail <= cq_tail + 32'd1;
                        state <= Q_IDLE;
                        if (dma_err) begin
                            // The ring is not in memory the device can write.
                            ev_bump <= 1'b1;
                            ev_err <= 1'b1;
                            ev_fault <= 1'b1;
                        end
                    end
                end
            endcase
        end
    end
`ifdef FORMAL
    // ---- formal properties (scripts/formal, this module alone) ------------
    // Every input is free: the producers, the host's CQ_HEAD, the DMA's
    // answers. What the host keeps of section 5 is monitored, not assumed.
    reg f_past_valid = 1'b0;
    always @(posedge clk)
        f_past_valid <= 1'b1;
    always @(*)
        if (!f_past_valid)
            assume(rst);

    // The host's CQ_HEAD since the rings last started: zero as ENABLE rose,
    // then only forward and never past CQ_TAIL; CQ_ENTRIES unchanged.
    reg [31:0] f_head, f_entries;
    reg        f_host_ok = 1'b0;
    always @(posedge clk) begin
        f_head <= cq_head;
        f_entries <= cq_entries;
    end
    wire f_rules_now = cq_entries == f_entries &&
                       cq_tail - cq_head <= cq_tail - f_head;
    wire f_ok = f_host_ok && f_rules_now;
    always @(posedge clk)
        if (rst)
            f_host_ok <= 1'b0;
        else if (flush)
            f_host_ok <= cq_head == 32'd0 && cq_entries >= 32'd2;
        else
            f_host_ok <= f_ok;

    always @(posedge clk)
        if (f_past_valid && !$past(rst) && !$past(flush)) begin
            // An entry is posted only into a free ring entry: CQ_TAIL -
            // CQ_HEAD below CQ_ENTRIES as its post starts, whatever the
            // host writes.
            if (state == Q_CRC && $past(state) == Q_IDLE)
                a_posts_only_with_room: assert($past(cq_tail - cq_head) < $past(cq_entries));
            // CQ_TAIL moves only by one, at the end of a post.
            if (cq_tail != $past(cq_tail))
                a_tail_steps: assert($past(state) == Q_WAIT && $past(dma_done) &&
                                     cq_tail == $past(cq_tail) + 32'd1);
        end
    always @(posedge clk)
        if (f_past_valid && ($past(rst) || $past(flush)))
            // ENABLE's either edge starts the ring afresh.
            a_tail_restarts: assert(cq_tail == 32'd0 && state == Q_IDLE);

    always @(*)
        if (f_past_valid && !rst && f_ok) begin
            // CQ_TAIL never runs more than CQ_ENTRIES ahead of CQ_HEAD.
            a_tail_within_entries: assert(cq_tail - cq_head <= cq_entries);
            // A post under way keeps the room it started with (helper).
            if (state != Q_IDLE)
                h_post_keeps_room: assert(cq_tail - cq_head < cq_entries);
        end
    always @(*)
        if (f_past_valid && !rst)
            h_count: assert(count <= QD[QW:0] && wr - rd == count[QW-1:0] &&
                            (state == Q_IDLE || count != {(QW + 1){1'b0}}));

    // Reachability (scripts/formal): an entry posted, from reset.
    (* keep *) wire f_reach = f_past_valid && !rst && f_host_ok && cq_tail != 32'd0;
    (* keep *) wire f_unreached = !f_reach;
`endif
endmodule

`default_nettype wire
