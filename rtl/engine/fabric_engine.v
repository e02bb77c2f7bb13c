// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_engine: one decode step of the word-trigram model with back-off,
// reading the model's table (docs/fabric-contract.md section 9) through a
// synchronous one-cycle memory port, and sampling with the contract's
// integer arithmetic (section 8). firmware/fabric-model's Table::step is the
// same computation in Rust, word for word; the co-simulation checks the two
// agree.
//
// A step: find the candidates of the context (a, b) by binary search of the
// trigram index, else of the bigram index by b, else take the unigrams; then
// greedy: the first candidate; scaled: sum the candidates' weights, scale
// the draw to the sum, and walk the candidates again to the one it lands in.
// Every table read takes two cycles (issue, use), so a step costs about
// 2 * (searched entries' depth + 2 * candidates) + 8 cycles.
//
// The engine keeps no state between steps (the shell holds each context's
// last tokens and random stream), so one engine serves every lane of its
// slot, a step at a time.

`default_nettype none

module fabric_engine #(
    parameter integer AW = 20  // table address bits (words)
) (
    input  wire          clk,
    input  wire          rst,
    // The header has been read (after reset: the slot was loaded).
    output reg           table_done,
    // The table's header checked out; identity = words 8..15.
    output reg           table_ok,
    output reg  [255:0]  identity,

    input  wire          req_valid,
    output wire          req_ready,
    input  wire [31:0]   req_a,
    input  wire [31:0]   req_b,
    input  wire [31:0]   req_draw,    // the high half of the step's SplitMix64 output
    input  wire          req_greedy,
    input  wire [19:0]   req_inv_t,   // floor(256 / T)

    output reg           rsp_valid,
    input  wire          rsp_ready,
    output reg  [31:0]   rsp_token,
    output reg           rsp_fault,   // no table: the step has no answer

    output reg  [AW-1:0] mem_addr,
    input  wire [31:0]   mem_data
);
    localparam [31:0] MAGIC = 32'h4654_4231;  // "FTB1"
    localparam [31:0] EOS = 32'd256;

    localparam [4:0]
        S_HDR_ISSUE  = 5'd0,
        S_HDR_USE    = 5'd1,
        S_IDLE       = 5'd2,
        S_SEARCH     = 5'd3,
        S_SEARCH_CMP = 5'd4,
        S_ENTRY      = 5'd5,
        S_CANDS      = 5'd6,
        S_SUM_ISSUE  = 5'd7,
        S_SUM_USE    = 5'd8,
        S_DRAW       = 5'd9,
        S_WALK_ISSUE = 5'd10,
        S_WALK_USE   = 5'd11,
        S_GREEDY_USE = 5'd12,
        S_DONE       = 5'd13,
        S_MISS       = 5'd14;

    reg [4:0] state;
    reg [3:0] hdr_i;

    // The header.
    reg [31:0] uni_first, uni_n, bi_base, bi_n, tri_base, tri_n;

    // The step.
    reg [31:0] b, draw;
    reg        greedy;
    reg [19:0] inv_t;
    reg        level;          // 0: searching the trigrams, 1: the bigrams
    reg [31:0] key, base, lo, hi, mid;
    reg [31:0] first, n, i;

    reg [15:0] first_log;
    reg [15:0] first_token;
    reg [39:0] total;
    reg [39:0] x;

    assign req_ready = (state == S_IDLE) && !rsp_valid;

`include "fabric_exp2.vh"

    // The weight of a candidate whose Q11 log is `log` when the first
    // candidate's is `top` (fabric_hw::sampling::weight).
    function [16:0] weight(input [15:0] top, input [15:0] log, input [19:0] it);
        reg [15:0] diff;
        reg [16:0] whole;      // d >> 11, d = (diff * it) >> 8
        reg [7:0]  frac;       // (d >> 3) & 0xFF
        reg [10:0] unused_low;
        begin
            diff = (top > log) ? (top - log) : 16'd0;
            {whole, frac, unused_low} = diff * it;
            if (whole >= 17'd17)
                weight = 17'd0;
            else
                weight = exp2_q16(frac) >> whole[4:0];
        end
    endfunction

    wire [15:0] cand_log = mem_data[15:0];
    wire [15:0] cand_token = mem_data[31:16];
    wire [16:0] w_sum = weight((i == 0) ? cand_log : first_log, cand_log, inv_t);
    wire [16:0] w_walk = weight(first_log, cand_log, inv_t);

    wire [39:0] scaled;                     // (draw * total) >> 32
    wire [31:0] unused_scaled_low;
    assign {scaled, unused_scaled_low} = draw * total;
    // Addresses are 32-bit words of the table; the memory takes AW bits.
    wire        unused_high = ^{base[31:AW], first[31:AW]};

    wire [31:0] mid_next = (lo + hi) >> 1;

    always @(posedge clk) begin
        if (rst) begin
            state <= S_HDR_ISSUE;
            hdr_i <= 4'd0;
            table_done <= 1'b0;
            table_ok <= 1'b0;
            rsp_valid <= 1'b0;
            rsp_fault <= 1'b0;
            rsp_token <= 32'd0;
        end else begin
            case (state)
                S_HDR_ISSUE: begin
                    mem_addr <= {{(AW-4){1'b0}}, hdr_i};
                    state <= S_HDR_USE;
                end
                S_HDR_USE: begin
                    case (hdr_i)
                        4'd0: table_ok <= (mem_data == MAGIC);
                        4'd2: uni_first <= mem_data;
                        4'd3: uni_n <= mem_data;
                        4'd4: bi_base <= mem_data;
                        4'd5: bi_n <= mem_data;
                        4'd6: tri_base <= mem_data;
                        4'd7: tri_n <= mem_data;
                        default: ;
                    endcase
                    // Words 8..15, first word most significant.
                    if (hdr_i[3])
                        identity <= {identity[223:0], mem_data};
                    hdr_i <= hdr_i + 4'd1;
                    table_done <= hdr_i == 4'd15;
                    state <= (hdr_i == 4'd15) ? S_IDLE : S_HDR_ISSUE;
                end
                S_IDLE: begin
                    if (req_valid && !rsp_valid) begin
                        b <= req_b;
                        draw <= req_draw;
                        greedy <= req_greedy;
                        inv_t <= req_inv_t;
                        if (!table_ok) begin
                            rsp_fault <= 1'b1;
                            rsp_token <= 32'd0;
                            rsp_valid <= 1'b1;
                        end else if (req_a[31:16] != 16'd0 || req_b[31:16] != 16'd0 ||
                                     tri_n == 32'd0) begin
                            // A token beyond 16 bits is in no trigram context.
                            level <= 1'b1;
                            key <= req_b;
                            base <= bi_base;
                            lo <= 32'd0;
                            hi <= bi_n;
                            state <= S_SEARCH;
                        end else begin
                            level <= 1'b0;
                            key <= {req_a[15:0], req_b[15:0]};
                            base <= tri_base;
                            lo <= 32'd0;
                            hi <= tri_n;
                            state <= S_SEARCH;
                        end
                    end
                end
                S_SEARCH: begin
                    if (lo < hi) begin
                        mid <= mid_next;
                        mem_addr <= base[AW-1:0] + {mid_next[AW-2:0], 1'b0};
                        state <= S_SEARCH_CMP;
                    end else begin
                        state <= S_MISS;
                    end
                end
                S_SEARCH_CMP: begin
                    if (mem_data == key) begin
                        mem_addr <= base[AW-1:0] + {mid[AW-2:0], 1'b1};
                        state <= S_ENTRY;
                    end else begin
                        if (mem_data < key)
                            lo <= mid + 32'd1;
                        else
                            hi <= mid;
                        state <= S_SEARCH;
                    end
                end
                S_MISS: begin
                    if (level == 1'b0) begin
                        level <= 1'b1;
                        key <= b;
                        base <= bi_base;
                        lo <= 32'd0;
                        hi <= bi_n;
                        state <= S_SEARCH;
                    end else begin
                        first <= uni_first;
                        n <= uni_n;
                        state <= S_CANDS;
                    end
                end
                S_ENTRY: begin
                    first <= {8'd0, mem_data[31:8]};
                    n <= {24'd0, mem_data[7:0]};
                    state <= S_CANDS;
                end
                S_CANDS: begin
                    i <= 32'd0;
                    total <= 40'd0;
                    if (n == 32'd0) begin
                        rsp_token <= EOS;
                        rsp_fault <= 1'b0;
                        rsp_valid <= 1'b1;
                        state <= S_DONE;
                    end else if (greedy || n == 32'd1) begin
                        mem_addr <= first[AW-1:0];
                        state <= S_GREEDY_USE;
                    end else begin
                        state <= S_SUM_ISSUE;
                    end
                end
                S_GREEDY_USE: begin
                    rsp_token <= {16'd0, cand_token};
                    rsp_fault <= 1'b0;
                    rsp_valid <= 1'b1;
                    state <= S_DONE;
                end
                S_SUM_ISSUE: begin
                    mem_addr <= first[AW-1:0] + i[AW-1:0];
                    state <= S_SUM_USE;
                end
                S_SUM_USE: begin
                    if (i == 32'd0) begin
                        first_log <= cand_log;
                        first_token <= cand_token;
                    end
                    total <= total + {23'd0, w_sum};
                    i <= i + 32'd1;
                    state <= (i + 32'd1 == n) ? S_DRAW : S_SUM_ISSUE;
                end
                S_DRAW: begin
                    x <= scaled;
                    i <= 32'd0;
                    state <= S_WALK_ISSUE;
                end
                S_WALK_ISSUE: begin
                    mem_addr <= first[AW-1:0] + i[AW-1:0];
                    state <= S_WALK_USE;
                end
                S_WALK_USE: begin
                    if (x < {23'd0, w_walk}) begin
                        rsp_token <= {16'd0, cand_token};
                        rsp_fault <= 1'b0;
                        rsp_valid <= 1'b1;
                        state <= S_DONE;
                    end else if (i + 32'd1 == n) begin
                        // Unreachable with a well-formed table (x < total);
                        // the reference falls back to the first candidate.
                        rsp_token <= {16'd0, first_token};
                        rsp_fault <= 1'b0;
                        rsp_valid <= 1'b1;
                        state <= S_DONE;
                    end else begin
                        x <= x - {23'd0, w_walk};
                        i <= i + 32'd1;
                        state <= S_WALK_ISSUE;
                    end
                end
                S_DONE: begin
                    if (rsp_valid && rsp_ready) begin
                        rsp_valid <= 1'b0;
                        state <= S_IDLE;
                    end
                end
                default: state <= S_HDR_ISSUE;
            endcase
            // An answer given at the table's check (no table) ends here.
            if (state == S_IDLE && rsp_valid && rsp_ready)
                rsp_valid <= 1'b0;
        end
    end
endmodule

`default_nettype wire
