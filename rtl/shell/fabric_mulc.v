// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_mulc: the low 64 bits of x * C for a constant C, pipelined over
// four cycles so that no path holds more than one multiplier or one adder.
// x is cut into limbs of 17 bits and C into limbs of 24, the unsigned
// operands a 7-series DSP48E1's 25 x 18 signed multiplier takes (a DSP48E2
// takes them too). Of their products only those whose weight is below
// 2^64 matter: five keep more than 16 bits and take a DSP slice each; the
// three that keep 16 bits or fewer (weights 2^48, 2^51, 2^58) are x's low
// bits times C's, shifts and adds in LUTs. SplitMix64's two multiplies
// (contract section 8) are two of these; sixteen-bit limbs took ten slices
// a multiply, these take five.
`default_nettype none
module fabric_mulc #(
    parameter [63:0] C = 64'h0,
    parameter integer TW = 8           // bits of the tag carried alongside
) (
    input  wire          clk,
    input  wire          in_valid,
    input  wire [63:0]   in_x,
    input  wire [TW-1:0] in_tag,
    output reg           out_valid,
    output reg  [63:0]   out_p,
    output reg  [TW-1:0] out_tag
);
    localparam [23:0] C0 = C[23:0];
    localparam [23:0] C1 = C[47:24];
    localparam [15:0] C2 = C[63:48];
    wire [16:0] x0 = in_x[16:0], x1 = in_x[33:17], x2 = in_x[50:34];
    wire [12:0] x3 = in_x[63:51];

    // The low 16 bits of x times a constant's low 16 bits: a sum of x's
    // shifts, one for each bit the constant has set.
    function [15:0] low16(input [15:0] x, input [15:0] c);
        integer b;
        begin
            low16 = 16'd0;
            for (b = 0; b < 16; b = b + 1)
                if (c[b])
                    low16 = low16 + (x << b);
        end
    endfunction

    // Cycle 1: the products (p<i><j> = x_i * C_j, weight 2^(17i + 24j)),
    // each to the bits that stay below 2^64.
    reg [40:0] p00, p10;                // weights 2^0, 2^17
    reg [39:0] p01;                     // 2^24
    reg [29:0] p20;                     // 2^34
    reg [22:0] p11;                     // 2^41
    reg [15:0] p02;                     // 2^48
    reg [12:0] p30;                     // 2^51
    reg [5:0]  p21;                     // 2^58
    reg        v1;
    reg [TW-1:0] t1;
    wire [15:0] p30_w = low16({3'd0, x3}, C0[15:0]);
    wire [15:0] p21_w = low16({10'd0, x2[5:0]}, {10'd0, C1[5:0]});
    wire [2:0]  unused_p30 = p30_w[15:13];
    wire [9:0]  unused_p21 = p21_w[15:6];
    always @(posedge clk) begin
        v1 <= in_valid;
        t1 <= in_tag;
        p00 <= {24'd0, x0} * {17'd0, C0};
        p10 <= {24'd0, x1} * {17'd0, C0};
        p01 <= x0 * C1;
        p20 <= x2 * C0;
        p11 <= x1 * C1[22:0];
        p02 <= low16(x0[15:0], C2);
        p30 <= p30_w[12:0];
        p21 <= p21_w[5:0];
    end
    // Cycle 2: pairs, to the bits that stay below 2^64.
    reg [63:0] s0, s1, s2, s3;
    reg        v2;
    reg [TW-1:0] t2;
    always @(posedge clk) begin
        v2 <= v1;
        t2 <= t1;
        s0 <= {23'd0, p00} + {6'd0, p10, 17'd0};
        s1 <= {p01, 24'd0} + {p20, 34'd0};
        s2 <= {p11, 41'd0} + {p02, 48'd0};
        s3 <= {p30, 51'd0} + {p21, 58'd0};
    end
    // Cycle 3: pairs of pairs; cycle 4: the total.
    reg [63:0] u, w;
    reg        v3;
    reg [TW-1:0] t3;
    always @(posedge clk) begin
        v3 <= v2;
        t3 <= t2;
        u <= s0 + s1;
        w <= s2 + s3;
        out_valid <= v3;
        out_tag <= t3;
        out_p <= u + w;
    end
endmodule

`default_nettype wire
