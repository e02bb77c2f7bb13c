// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_lm_div against Verilog's own `/`: random dividends over divisors
// of every kind the transformer and its corner cases give (small, full
// 32-bit, top bit set, powers of two, zero), and the cycles a division
// takes, which fabric_model::lm::cycles counts (DIVIDE). scripts/rtl-lint
// runs it under iverilog; it prints "fabric_lm_div: ok" or what was wrong.

`timescale 1ns / 1ps
`default_nettype none

module fabric_lm_div_tb;
    reg         clk = 1'b0;
    reg         rst = 1'b1;
    reg         start = 1'b0;
    reg  [63:0] num;
    reg  [31:0] den;
    wire        done;
    wire [63:0] q;
    fabric_lm_div dut (.clk(clk), .rst(rst), .start(start), .num(num), .den(den),
                       .done(done), .q(q));
    always #1 clk = ~clk;

    integer i, bad, cycles, slow;
    reg [63:0] want;
    initial begin
        bad = 0;
        slow = 0;
        @(posedge clk);
        rst <= 1'b0;
        for (i = 0; i < 40000; i = i + 1) begin
            num = {$random, $random};
            case (i % 8)
                0: den = $random;
                1: den = $random & 32'hFF;
                2: den = 32'hFFFF_FFFF - i % 5;
                3: den = 32'h8000_0000 | $random;
                4: den = i % 3;
                5: begin
                    num = 64'd1 << (40 + i % 9);
                    den = $random & 32'h7_FFFF;
                end
                6: begin
                    num = 64'hFFFF_FFFF_FFFF_FFFF;
                    den = $random;
                end
                default: den = 32'd1 << (i % 32);
            endcase
            want = (den == 32'd0) ? 64'hFFFF_FFFF_FFFF_FFFF : num / den;
            @(posedge clk);
            start <= 1'b1;
            @(posedge clk);
            start <= 1'b0;
            cycles = 1;
            // Bounded, so that a divider that never says done fails here
            // rather than hanging rtl-lint.
            while (!done && cycles < 100) begin
                @(posedge clk);
                cycles = cycles + 1;
            end
            // From the start's cycle to done's, as S_DIV waits for it.
            if (cycles != 34)
                slow = slow + 1;
            if (q !== want) begin
                bad = bad + 1;
                if (bad <= 4)
                    $display("fabric_lm_div: %h / %h gave %h, not %h", num, den, q, want);
            end
        end
        if (bad == 0 && slow == 0)
            $display("fabric_lm_div: ok");
        else
            $display("fabric_lm_div: %0d wrong, %0d not 34 cycles, of %0d", bad, slow, i);
        $finish;
    end
endmodule

`default_nettype wire
