// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_lm_stream: the transformer engine's reads, as a stream of beats
// as wide as its port (DW bits: 64 on a Zynq-7000 HP port, 128 on a K26
// one), starting at any 32-bit word. A command asks for `words` words from
// a word-aligned byte address; the stream hands back ceil(words / WPB)
// beats, the first word of the command in the low bits of the first beat
// (the last beat's words past the command's end are whatever follows). Where the command
// does not start at a beat's boundary, each beat is the high words of one
// port beat and the low words of the next (a gearbox), so a matrix row is
// read whole at the port's width wherever the weights file puts it.
//
// One command at a time; fabric_axi_rd keeps several bursts outstanding
// under it. `err` marks a beat the port answered with anything but OKAY
// (either of the port beats it was made from).

`default_nettype none

module fabric_lm_stream #(
    parameter integer AW = 40,
    parameter integer DW = 64,
    parameter integer MAX_BURST = 16,
    parameter integer MAX_OUT = 4,
    // Derived from the parameters above: leave them be.
    parameter integer WPB = DW / 32,
    parameter integer OW = (WPB > 1) ? $clog2(WPB) : 1,
    parameter integer SZ = $clog2(DW / 8)
) (
    input  wire          clk,
    input  wire          rst,

    input  wire          cmd_valid,
    output wire          cmd_ready,
    input  wire [AW-1:0] cmd_addr,      // 4-byte aligned
    input  wire [23:0]   cmd_words,     // 1 or more

    output reg           s_valid,
    input  wire          s_ready,
    output reg  [DW-1:0] s_data,
    output reg           s_last,
    output reg           s_err,

    output wire          idle,

    output wire [AW-1:0] m_araddr,
    output wire [7:0]    m_arlen,
    output wire [2:0]    m_arsize,
    output wire [1:0]    m_arburst,
    output wire          m_arvalid,
    input  wire          m_arready,
    input  wire [DW-1:0] m_rdata,
    input  wire [1:0]    m_rresp,
    input  wire          m_rlast,
    input  wire          m_rvalid,
    output wire          m_rready
);
    // The command's word offset in its first port beat, and its port
    // beats: ceil((offset + words) / WPB).
    wire [OW-1:0] c_off = (WPB > 1) ? cmd_addr[SZ-1:2] : {OW{1'b0}};
    wire [24:0]   c_span = {1'b0, cmd_words} + {{(25 - OW){1'b0}}, c_off} + WPB[24:0] - 25'd1;
    wire [24:0]   c_beats_w = c_span >> OW;
    wire [24:0]   c_outs_w = ({1'b0, cmd_words} + WPB[24:0] - 25'd1) >> OW;
    wire [23:0]   c_beats = c_beats_w[23:0];
    wire [23:0]   c_outs = c_outs_w[23:0];
    wire          unused_bits = ^{c_beats_w[24], c_outs_w[24], cmd_addr[1:0]};

    reg           busy;
    reg  [OW-1:0] off;
    reg  [23:0]   outs;          // beats still to hand back
    reg           have;          // a port beat held for the next one
    reg  [DW-1:0] prev;
    reg           prev_err;
    reg           port_done;     // the command's port beats have all come

    wire          rd_valid, rd_last, rd_err, rd_idle, rd_cmd_ready, unused_tag;
    wire [DW-1:0] rd_data;
    wire          out_free = !s_valid || s_ready;
    wire          aligned = off == {OW{1'b0}};
    // A port beat is taken while the beat it makes (if any) has room.
    wire          rd_ready = busy && !port_done && out_free;
    wire          take = rd_valid && rd_ready;
    // The last beat's words may all lie in the last port beat held: it
    // goes out alone, with zeros above.
    wire          flush = busy && port_done && have && outs != 24'd0 && out_free;

    assign cmd_ready = !busy && rd_cmd_ready;
    assign idle = !busy && rd_idle;

    fabric_axi_rd #(
        .AW(AW), .DW(DW), .MAX_BURST(MAX_BURST), .MAX_OUT(MAX_OUT), .TW(1), .BW(24)
    ) rd (
        .clk(clk), .rst(rst),
        .cmd_valid(cmd_valid && cmd_ready), .cmd_ready(rd_cmd_ready), .cmd_addr({cmd_addr[AW-1:SZ], {SZ{1'b0}}}),
        .cmd_beats(c_beats), .cmd_tag(1'b0),
        .rd_valid(rd_valid), .rd_ready(rd_ready), .rd_data(rd_data), .rd_tag(unused_tag),
        .rd_last(rd_last), .rd_err(rd_err),
        .m_araddr(m_araddr), .m_arlen(m_arlen), .m_arsize(m_arsize), .m_arburst(m_arburst),
        .m_arvalid(m_arvalid), .m_arready(m_arready), .m_rdata(m_rdata), .m_rresp(m_rresp),
        .m_rlast(m_rlast), .m_rvalid(m_rvalid), .m_rready(m_rready),
        .idle(rd_idle)
    );

    // Two port beats, the older low, shifted down by the offset's words.
    wire [2*DW-1:0] pair = {rd_data, prev};
    localparam integer PI = $clog2(2 * DW);
    wire [PI-1:0]   at = {{(PI - OW - 5){1'b0}}, off, 5'd0};
    wire [DW-1:0]   joined = pair[at +: DW];
    wire [2*DW-1:0] tail = {{DW{1'b0}}, prev};
    wire [DW-1:0]   flushed = tail[at +: DW];

    always @(posedge clk) begin
        if (rst) begin
            busy <= 1'b0;
            s_valid <= 1'b0;
            have <= 1'b0;
            port_done <= 1'b0;
        end else begin
            if (s_valid && s_ready)
                s_valid <= 1'b0;
            if (cmd_valid && cmd_ready) begin
                busy <= 1'b1;
                off <= c_off;
                outs <= c_outs;
                have <= 1'b0;
                port_done <= 1'b0;
            end
            if (take) begin
                if (rd_last)
                    port_done <= 1'b1;
                if (aligned) begin
                    s_valid <= 1'b1;
                    s_data <= rd_data;
                    s_err <= rd_err;
                    s_last <= outs == 24'd1;
                    outs <= outs - 24'd1;
                end else if (!have) begin
                    have <= 1'b1;
                    prev <= rd_data;
                    prev_err <= rd_err;
                end else begin
                    s_valid <= 1'b1;
                    s_data <= joined;
                    s_err <= rd_err || prev_err;
                    s_last <= outs == 24'd1;
                    outs <= outs - 24'd1;
                    prev <= rd_data;
                    prev_err <= rd_err;
                end
            end else if (flush) begin
                s_valid <= 1'b1;
                s_data <= flushed;
                s_err <= prev_err;
                s_last <= 1'b1;
                outs <= 24'd0;
                have <= 1'b0;
            end
            if (busy && port_done && (outs == 24'd0 || !have) && out_free && !take && !flush &&
                !(s_valid && !s_ready))
                busy <= 1'b0;
        end
    end
endmodule

`default_nettype wire
