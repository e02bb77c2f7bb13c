// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_splitmix: SplitMix64 (contract section 8), one draw a cycle,
// twelve cycles deep: the state advanced by the golden gamma, then the two
// xor-shift-multiply rounds, each multiply fabric_mulc's four cycles. A
// context's next draw is computed while its current step runs, so the
// draw costs a step nothing (fabric_ctx keeps it ready). The tag names the
// context the draw is for.

`default_nettype none

module fabric_splitmix #(
    parameter integer TW = 8
) (
    input  wire          clk,
    input  wire          in_valid,
    input  wire [63:0]   in_state,
    input  wire [TW-1:0] in_tag,
    output reg           out_valid,
    output reg  [63:0]   out_state,   // the state this draw came from
    output reg  [31:0]   out_draw,    // the high half of the output
    output reg  [TW-1:0] out_tag
);
    localparam [63:0] GAMMA = 64'h9E37_79B9_7F4A_7C15;
    localparam [63:0] M1 = 64'hBF58_476D_1CE4_E5B9;
    localparam [63:0] M2 = 64'h94D0_49BB_1331_11EB;
    localparam integer AW = 64 + TW;   // what rides along: the state and the tag

    // Cycle 1: the state advances.
    reg [63:0] z;
    reg        v1;
    reg [TW-1:0] t1;
    always @(posedge clk) begin
        v1 <= in_valid;
        t1 <= in_tag;
        z <= in_state + GAMMA;
    end

    // Cycle 2: z ^ (z >> 30).
    reg [63:0] x1;
    reg        v2;
    reg [AW-1:0] a2;
    always @(posedge clk) begin
        v2 <= v1;
        a2 <= {z, t1};
        x1 <= z ^ (z >> 30);
    end

    // Cycles 3-6: * M1.
    wire          m1_valid;
    wire [63:0]   m1;
    wire [AW-1:0] a6;
    fabric_mulc #(.C(M1), .TW(AW)) mul1 (
        .clk(clk), .in_valid(v2), .in_x(x1), .in_tag(a2),
        .out_valid(m1_valid), .out_p(m1), .out_tag(a6)
    );

    // Cycle 7: ^ (>> 27).
    reg [63:0] x2;
    reg        v7;
    reg [AW-1:0] a7;
    always @(posedge clk) begin
        v7 <= m1_valid;
        a7 <= a6;
        x2 <= m1 ^ (m1 >> 27);
    end

    // Cycles 8-11: * M2.
    wire          m2_valid;
    wire [63:0]   m2;
    wire [AW-1:0] a11;
    fabric_mulc #(.C(M2), .TW(AW)) mul2 (
        .clk(clk), .in_valid(v7), .in_x(x2), .in_tag(a7),
        .out_valid(m2_valid), .out_p(m2), .out_tag(a11)
    );

    // Cycle 12: ^ (>> 31), of which the step uses the high half (Verilator
    // leaves signals named *unused* alone; synthesis drops their logic).
    wire unused_low = ^m2[31:0];
    always @(posedge clk) begin
        out_valid <= m2_valid;
        out_state <= a11[AW-1:TW];
        out_tag <= a11[TW-1:0];
        out_draw <= m2[63:32] ^ {31'd0, m2[63]};
    end
endmodule

`default_nettype wire
