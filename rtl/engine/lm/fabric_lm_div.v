// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_lm_div: floor(num / den), unsigned, two quotient bits a cycle
// (restoring division in radix 4, 32 cycles). The transformer divides a
// few times a vector, never an element (contract section 10: a norm's
// mean square and reciprocal, a quantization's reciprocal, the
// attention's total), so one small divider serves them all; but a
// lane's attention waits on it four times a head, so it takes two bits
// a cycle. The digit is found by trying the remainder against d, 2d and
// 3d side by side, not one bit after the other: the longest path is one
// subtraction and a choice, as a bit a cycle's was. A zero divisor gives
// all ones.

`default_nettype none

module fabric_lm_div (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire [63:0] num,
    input  wire [31:0] den,
    output reg         done,
    output reg  [63:0] q
);
    reg [5:0]  n;
    reg        busy;
    reg [31:0] rem;              // below d, so the next digit is 0 to 3
    reg [63:0] left;             // the dividend's bits still to bring down
    reg [33:0] d1, d2, d3;       // d, 2d, 3d
    wire [33:0] r4 = {rem, left[63:62]};
    // Each trial's top bit is its borrow: set where r4 is below it.
    wire [34:0] t1 = {1'b0, r4} - {1'b0, d1};
    wire [34:0] t2 = {1'b0, r4} - {1'b0, d2};
    wire [34:0] t3 = {1'b0, r4} - {1'b0, d3};
    wire [1:0]  digit = !t3[34] ? 2'd3 : !t2[34] ? 2'd2 : !t1[34] ? 2'd1 : 2'd0;
    wire [31:0] next_rem = !t3[34] ? t3[31:0] : !t2[34] ? t2[31:0] :
                           !t1[34] ? t1[31:0] : r4[31:0];
    wire [5:0]  unused_t = {t1[33:32], t2[33:32], t3[33:32]};

    always @(posedge clk) begin
        done <= 1'b0;
        if (rst) begin
            busy <= 1'b0;
        end else if (start) begin
            busy <= 1'b1;
            n <= 6'd32;
            rem <= 32'd0;
            left <= num;
            d1 <= {2'd0, den};
            d2 <= {1'b0, den, 1'b0};
            d3 <= {2'd0, den} + {1'b0, den, 1'b0};
            q <= 64'd0;
        end else if (busy) begin
            rem <= next_rem;
            left <= {left[61:0], 2'b00};
            q <= {q[61:0], digit};
            n <= n - 6'd1;
            if (n == 6'd1) begin
                busy <= 1'b0;
                done <= 1'b1;
            end
        end
    end
endmodule

`default_nettype wire
