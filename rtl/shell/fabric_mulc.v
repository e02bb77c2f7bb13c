// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_mulc: the low 64 bits of x * C for a constant C, pipelined over
// four cycles so that no path holds more than one multiplier or one adder.
// x and C are cut into 16-bit limbs; of their 16 products only the ten whose
// weight is below 2^64 matter, each a 16 x 16 product that fits one DSP
// slice with its output register. The products of one weight are summed,
// then the four sums, each in its own cycle. SplitMix64's two multiplies
// (contract section 8) are two of these.

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
    wire [15:0] c0 = C[15:0], c1 = C[31:16], c2 = C[47:32], c3 = C[63:48];
    wire [15:0] x0 = in_x[15:0], x1 = in_x[31:16], x2 = in_x[47:32], x3 = in_x[63:48];

    // Cycle 1: the ten products (p<i><j> = x_i * c_j, weight 2^(16(i+j))).
    reg [31:0] p00, p01, p10, p02, p11, p20;
    reg [15:0] p03, p12, p21, p30;         // weight 2^48: their low halves stay
    reg        v1;
    reg [TW-1:0] t1;
    always @(posedge clk) begin
        v1 <= in_valid;
        t1 <= in_tag;
        p00 <= x0 * c0;
        p01 <= x0 * c1;
        p10 <= x1 * c0;
        p02 <= x0 * c2;
        p11 <= x1 * c1;
        p20 <= x2 * c0;
        p03 <= x0 * c3;
        p12 <= x1 * c2;
        p21 <= x2 * c1;
        p30 <= x3 * c0;
    end

    // Cycle 2: the products of each weight summed, to the bits that stay
    // below 2^64.
    reg [31:0] w0;
    reg [47:0] w1;
    reg [31:0] w2;
    reg [15:0] w3;
    reg        v2;
    reg [TW-1:0] t2;
    always @(posedge clk) begin
        v2 <= v1;
        t2 <= t1;
        w0 <= p00;
        w1 <= {16'd0, p01} + {16'd0, p10};
        w2 <= p02 + p11 + p20;
        w3 <= p03 + p12 + p21 + p30;
    end

    // Cycle 3: pairs; cycle 4: the total.
    reg [63:0] u, w;
    reg        v3;
    reg [TW-1:0] t3;
    always @(posedge clk) begin
        v3 <= v2;
        t3 <= t2;
        u <= {32'd0, w0} + {w1, 16'd0};
        w <= {w2, 32'd0} + {w3, 48'd0};
        out_valid <= v3;
        out_tag <= t3;
        out_p <= u + w;
    end
endmodule

`default_nettype wire
