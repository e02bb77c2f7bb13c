// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_lm_div: floor(num / den), unsigned, a quotient bit a cycle
// (restoring division, 64 cycles). The transformer divides a few times a
// vector, never an element (contract section 10: a norm's mean square and
// reciprocal, a quantization's reciprocal, the attention's total), so one
// small divider serves them all. A zero divisor gives all ones.

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
    reg [6:0]  n;
    reg        busy;
    reg [31:0] rem;
    reg [63:0] left;             // the dividend's bits still to bring down
    reg [31:0] d;
    wire [32:0] trial = {rem, left[63]};
    wire        fits = trial >= {1'b0, d};

    always @(posedge clk) begin
        done <= 1'b0;
        if (rst) begin
            busy <= 1'b0;
        end else if (start) begin
            busy <= 1'b1;
            n <= 7'd64;
            rem <= 32'd0;
            left <= num;
            d <= den;
            q <= 64'd0;
        end else if (busy) begin
            rem <= fits ? trial[31:0] - d : trial[31:0];
            left <= {left[62:0], 1'b0};
            q <= {q[62:0], fits};
            n <= n - 7'd1;
            if (n == 7'd1) begin
                busy <= 1'b0;
                done <= 1'b1;
            end
        end
    end
endmodule

`default_nettype wire
