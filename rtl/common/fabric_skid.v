// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_skid: a register slice for a valid/ready channel. Every output is
// a flip-flop, READY included, and it passes a word a cycle: while the
// output is held, the word accepted meanwhile waits in a second register
// (the skid), and READY falls a cycle later. The shell puts one on each
// side of a partition boundary, so no path crosses it through logic.

`default_nettype none

module fabric_skid #(
    parameter integer W = 32
) (
    input  wire         clk,
    input  wire         rst,

    input  wire         s_valid,
    output reg          s_ready,
    input  wire [W-1:0] s_data,

    output reg          m_valid,
    input  wire         m_ready,
    output reg  [W-1:0] m_data
);
    reg [W-1:0] skid;
    reg         skid_valid;

    wire take = s_valid && s_ready;

    always @(posedge clk) begin
        if (rst) begin
            m_valid <= 1'b0;
            skid_valid <= 1'b0;
            s_ready <= 1'b1;
        end else if (m_ready || !m_valid) begin
            // The output register is free this cycle.
            if (skid_valid) begin
                m_data <= skid;
                m_valid <= 1'b1;
                skid_valid <= 1'b0;
                s_ready <= 1'b1;
            end else begin
                m_valid <= take;
                if (take)
                    m_data <= s_data;
            end
        end else if (take) begin
            // The output is held: park the word.
            skid <= s_data;
            skid_valid <= 1'b1;
            s_ready <= 1'b0;
        end
    end
`ifdef FORMAL
    // What the slice holds (helpers for the k-induction of the modules
    // around it): a parked word only behind an offered one, READY exactly
    // while nothing is parked.
    reg f_past_valid = 1'b0;
    always @(posedge clk)
        f_past_valid <= 1'b1;
    always @(*)
        if (f_past_valid && !rst) begin
            h_skid_behind_output: assert(!skid_valid || m_valid);
            h_ready_while_empty: assert(s_ready == !skid_valid);
        end
`endif
endmodule

`default_nettype wire
