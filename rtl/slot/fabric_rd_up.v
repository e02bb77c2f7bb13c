// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_rd_up: a 32-bit AXI4 read master onto a 64-bit port. A slot's
// boundary carries the port at its width (64 bits, an HP port's, which
// the transformer streams its weights at), and an engine that reads
// 32-bit words (the trigram engine) reads through this: each burst of
// 32-bit beats becomes the burst of 64-bit beats that covers the same
// bytes, and each 64-bit beat is handed back as its one or two words in
// address order (little-endian: the word at the lower address in bits
// 31:0). A burst within a 4 KiB page stays within it: the wide burst
// covers the same bytes, aligned down to 8. Bursts outstanding are
// remembered in order (AXI answers one ID's reads in order), MAX_OUT of
// them: the engine's own bound.

`default_nettype none

module fabric_rd_up #(
    parameter integer AW = 40,
    parameter integer MAX_OUT = 4,
    // Derived from the parameters above: leave them be.
    parameter integer QW = (MAX_OUT > 1) ? $clog2(MAX_OUT) : 1
) (
    input  wire          clk,
    input  wire          rst,

    // The engine's side: 32-bit beats.
    input  wire [AW-1:0] s_araddr,
    input  wire [7:0]    s_arlen,
    input  wire          s_arvalid,
    output wire          s_arready,
    output wire [31:0]   s_rdata,
    output wire [1:0]    s_rresp,
    output wire          s_rlast,
    output wire          s_rvalid,
    input  wire          s_rready,

    // The port's side: 64-bit beats.
    output wire [AW-1:0] m_araddr,
    output wire [7:0]    m_arlen,
    output wire          m_arvalid,
    input  wire          m_arready,
    input  wire [63:0]   m_rdata,
    input  wire [1:0]    m_rresp,
    input  wire          m_rlast,
    input  wire          m_rvalid,
    output wire          m_rready
);
    // Each burst outstanding: whether its first word is a beat's upper
    // half, and its words.
    reg           q_high [0:MAX_OUT-1];
    reg  [8:0]    q_words [0:MAX_OUT-1];
    reg  [QW-1:0] q_head, q_tail;
    reg  [QW:0]   q_n;
    reg  [8:0]    done;                  // words of the head burst handed back

    localparam integer QLAST = MAX_OUT - 1;
    wire       full = q_n == MAX_OUT[QW:0];
    wire [1:0] unused_addr = s_araddr[1:0];
    wire       busy = q_n != {(QW + 1){1'b0}};
    wire [8:0] words = {1'b0, s_arlen} + 9'd1;
    assign m_araddr = {s_araddr[AW-1:3], 3'b000};
    // Beats of 8 bytes covering [addr, addr + 4 * words).
    wire [9:0] beats = ({9'd0, s_araddr[2]} + {1'b0, words} + 10'd1) >> 1;
    assign m_arlen = beats[7:0] - 8'd1;
    wire       unused_beats = ^{beats[9:8], m_rlast};
    assign m_arvalid = s_arvalid && !full;
    assign s_arready = m_arready && !full;

    wire high = q_high[q_head] ^ done[0];
    wire last = done + 9'd1 == q_words[q_head];
    assign s_rdata = high ? m_rdata[63:32] : m_rdata[31:0];
    assign s_rresp = m_rresp;
    assign s_rlast = last;
    assign s_rvalid = m_rvalid && busy;
    // A wide beat is taken once its last word for this burst is.
    assign m_rready = busy && s_rready && (high || last);

    wire ar = s_arvalid && s_arready;
    wire word = s_rvalid && s_rready;
    wire pop = word && last;

    always @(posedge clk) begin
        if (rst) begin
            q_head <= {QW{1'b0}};
            q_tail <= {QW{1'b0}};
            q_n <= {(QW + 1){1'b0}};
            done <= 9'd0;
        end else begin
            if (ar) begin
                q_high[q_tail] <= s_araddr[2];
                q_words[q_tail] <= words;
                q_tail <= (q_tail == QLAST[QW-1:0]) ? {QW{1'b0}} : q_tail + 1'b1;
            end
            if (pop) begin
                q_head <= (q_head == QLAST[QW-1:0]) ? {QW{1'b0}} : q_head + 1'b1;
                done <= 9'd0;
            end else if (word) begin
                done <= done + 9'd1;
            end
            q_n <= q_n + {{QW{1'b0}}, ar} - {{QW{1'b0}}, pop};
        end
    end
endmodule

`default_nettype wire
