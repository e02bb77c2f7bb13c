// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_axi_rd: an AXI4 read master (AR and R only) for an engine's own HP
// port. A command asks for `beats` beats of DW bits from a DW-aligned byte
// address; the master cuts it into INCR bursts of at most MAX_BURST beats
// that never cross a 4 KiB boundary (AMBA AXI, IHI 0022, A3.4.1: "A burst
// must not cross a 4KB address boundary"), keeps up to MAX_OUT bursts
// outstanding, and hands the beats back in order with the command's tag,
// whether it is the command's last, and whether the slave answered it with
// anything but OKAY (a DECERR or SLVERR). One ID: the slave answers bursts
// in the order they were asked for.
//
// MAX_BURST is 16 where the port is AXI3 (the Zynq-7000's HP ports, UG585
// "standard AXI 3.0") and may be up to 256 on an AXI4 port (the K26's).
// Commands queue in order: up to MAX_OUT of them may be waiting for their
// beats while the next one issues its bursts.

`default_nettype none

module fabric_axi_rd #(
    parameter integer AW = 40,
    parameter integer DW = 64,
    parameter integer MAX_BURST = 16,
    parameter integer MAX_OUT = 4,
    parameter integer TW = 2,              // a command's tag
    parameter integer BW = 16,             // bits of a command's beat count
    // Derived from the parameters above: leave them be.
    parameter integer SZ = $clog2(DW / 8), // bytes a beat, as ARSIZE says it
    parameter integer QW = (MAX_OUT > 1) ? $clog2(MAX_OUT) : 1,
    parameter integer OW = $clog2(MAX_OUT + 1) - 1
) (
    input  wire          clk,
    input  wire          rst,

    input  wire          cmd_valid,
    output wire          cmd_ready,
    input  wire [AW-1:0] cmd_addr,      // DW-aligned
    input  wire [BW-1:0] cmd_beats,     // 1 or more
    input  wire [TW-1:0] cmd_tag,

    output wire          rd_valid,
    input  wire          rd_ready,
    output wire [DW-1:0] rd_data,
    output wire [TW-1:0] rd_tag,
    output wire          rd_last,       // the command's last beat
    output wire          rd_err,        // answered with a bus error

    output reg  [AW-1:0] m_araddr,
    output reg  [7:0]    m_arlen,
    output wire [2:0]    m_arsize,
    output wire [1:0]    m_arburst,
    output reg           m_arvalid,
    input  wire          m_arready,
    input  wire [DW-1:0] m_rdata,
    input  wire [1:0]    m_rresp,
    input  wire          m_rlast,
    input  wire          m_rvalid,
    output wire          m_rready,

    output wire          idle           // no command under way, no burst out
);
    localparam [2:0] SIZE = SZ[2:0];
    localparam integer PAGE_BEATS = 4096 / (DW / 8);
    localparam integer PW = $clog2(PAGE_BEATS);    // a beat's index in its page

    assign m_arsize = SIZE;
    assign m_arburst = 2'b01;                      // INCR

    // ---- the command being cut into bursts ---------------------------------
    reg          busy;
    reg [AW-1:0] addr;
    reg [BW-1:0] left;
    reg [TW-1:0] tag;

    assign cmd_ready = !busy;

    // The next burst: at most MAX_BURST beats, the command's remaining ones,
    // and the beats to the end of the 4 KiB page.
    wire [PW:0]  to_page = PAGE_BEATS[PW:0] - {1'b0, addr[PW+SZ-1:SZ]};
    wire [BW:0]  cap = (to_page < MAX_BURST[PW:0] ? {{(BW - PW){1'b0}}, to_page}
                                                  : MAX_BURST[BW:0]);
    wire [BW:0]  len = ({1'b0, left} < cap) ? {1'b0, left} : cap;

    // ---- bursts outstanding: a queue of (tag, last of its command, length)
    reg [TW+8:0] out_q [0:MAX_OUT-1];
    reg [QW-1:0] out_wr, out_rd;
    reg [OW:0]   out_n;
    localparam [OW:0] OUT_MAX = MAX_OUT[OW:0];
    wire issue = m_arvalid && m_arready;
    wire beat = m_rvalid && m_rready;
    wire retire = beat && m_rlast;

    assign m_rready = rd_ready && out_n != {(OW + 1){1'b0}};
    assign rd_valid = m_rvalid && out_n != {(OW + 1){1'b0}};
    assign rd_data = m_rdata;
    assign rd_tag = out_q[out_rd][TW+8:9];
    assign rd_last = m_rlast && out_q[out_rd][8];
    wire offer = !m_arvalid && busy && out_n < OUT_MAX;
    assign rd_err = m_rresp != 2'b00;
    assign idle = !busy && !m_arvalid && out_n == {(OW + 1){1'b0}};

    function [QW-1:0] bump(input [QW-1:0] p);
        bump = (p == MAX_OUT[QW-1:0] - 1'b1) ? {QW{1'b0}} : p + 1'b1;
    endfunction

    always @(posedge clk) begin
        if (rst) begin
            busy <= 1'b0;
            m_arvalid <= 1'b0;
            out_wr <= {QW{1'b0}};
            out_rd <= {QW{1'b0}};
            out_n <= {(OW + 1){1'b0}};
        end else begin
            if (cmd_valid && !busy) begin
                busy <= 1'b1;
                addr <= cmd_addr;
                left <= cmd_beats;
                tag <= cmd_tag;
            end
            // A burst is offered while the queue has room for it; its
            // payload holds until taken.
            if (offer) begin
                m_arvalid <= 1'b1;
                m_araddr <= addr;
                m_arlen <= len[7:0] - 8'd1;
                out_q[out_wr] <= {tag, len == {1'b0, left}, len[7:0] - 8'd1};
                out_wr <= bump(out_wr);
                addr <= addr + ({{(AW - BW - 1){1'b0}}, len} << SZ);
                left <= left - len[BW-1:0];
                if (len == {1'b0, left})
                    busy <= 1'b0;
            end else if (issue) begin
                m_arvalid <= 1'b0;
            end
            if (retire)
                out_rd <= bump(out_rd);
            // A burst counts from its offer (its queue entry is written
            // then) to its last beat.
            out_n <= out_n + {{OW{1'b0}}, offer} - {{OW{1'b0}}, retire};
        end
    end

`ifdef FORMAL
    // ---- formal properties (scripts/formal, this module alone) ------------
    // The slave (its ARREADY and the R channel) is assumed to keep AXI's
    // rules; the master's side is asserted: learnt from ZipCPU's
    // faxi_master (wb2axip), written for this master.
    reg f_past_valid = 1'b0;
    always @(posedge clk)
        f_past_valid <= 1'b1;
    always @(*)
        if (!f_past_valid)
            assume(rst);

    // What the engine owes: commands from a DW-aligned address, of a beat
    // or more.
    always @(*)
        if (cmd_valid)
            assume(cmd_addr[SZ-1:0] == {SZ{1'b0}} && cmd_beats != {BW{1'b0}});

    // What the slave owes: the beats of the burst at the head of the
    // queue (the oldest asked for), RLAST on its last, and nothing with no
    // burst asked for.
    wire [7:0] head_len = out_q[out_rd][7:0];     // its ARLEN
    reg [8:0]  f_beat;                   // beats of the head burst received
    reg [OW:0] f_bursts;                 // bursts asked for, not yet ended
    always @(posedge clk)
        if (rst) begin
            f_beat <= 9'd0;
            f_bursts <= {(OW + 1){1'b0}};
        end else begin
            if (beat)
                f_beat <= m_rlast ? 9'd0 : f_beat + 9'd1;
            f_bursts <= f_bursts + {{OW{1'b0}}, issue} - {{OW{1'b0}}, retire};
        end
    always @(*)
        if (f_past_valid && !rst && m_rvalid) begin
            assume(f_bursts != {(OW + 1){1'b0}});
            assume(m_rlast == ({1'b0, head_len} == f_beat));
        end
    always @(posedge clk)
        if (f_past_valid && !$past(rst) && !rst && $past(m_rvalid && !m_rready))
            // The slave holds an offered beat.
            assume(m_rvalid && m_rdata == $past(m_rdata) && m_rresp == $past(m_rresp) &&
                   m_rlast == $past(m_rlast));

    always @(posedge clk)
        if (f_past_valid && !$past(rst) && !rst) begin
            // ARVALID holds until ARREADY, and its payload with it.
            if ($past(m_arvalid && !m_arready))
                a_ar_held: assert(m_arvalid && m_araddr == $past(m_araddr) &&
                                  m_arlen == $past(m_arlen));
        end
    always @(*)
        if (f_past_valid && !rst) begin
            if (m_arvalid) begin
                // A burst never crosses 4 KiB: its first and last bytes
                // share the bits above bit 12.
                a_burst_within_4k: assert(({1'b0, m_araddr[11:0]} +
                                           (({5'd0, m_arlen} + 13'd1) << SZ) - 13'd1) < 13'd4096);
                a_burst_length: assert({1'b0, m_arlen} < MAX_BURST[8:0]);
                a_burst_aligned: assert(m_araddr[SZ-1:0] == {SZ{1'b0}});
                // The burst offered is the newest in the queue, as asked.
                a_burst_queued: assert(out_q[out_wr == {QW{1'b0}} ? MAX_OUT[QW-1:0] - 1'b1
                                                                 : out_wr - 1'b1][7:0] == m_arlen);
            end
            a_size_and_incr: assert(m_arsize == SIZE && m_arburst == 2'b01);
            // Every burst asked for is counted until its last beat, and no
            // more are outstanding than MAX_OUT.
            a_bursts_counted: assert(f_bursts + {{OW{1'b0}}, m_arvalid} == out_n);
            a_bursts_bounded: assert(out_n <= OUT_MAX);
            // Beats go to the consumer only for bursts asked for.
            a_no_beat_unasked: assert(!rd_valid || out_n != {(OW + 1){1'b0}});
            // Helpers for the induction: the master's own state is
            // consistent, the head burst within its length.
            h_head_beats: assert(f_bursts == {(OW + 1){1'b0}} || f_beat <= {1'b0, head_len});
            h_idle_beat: assert(f_bursts != {(OW + 1){1'b0}} || f_beat == 9'd0);
            h_busy_has_beats: assert(!busy || (left != {BW{1'b0}} && addr[SZ-1:0] == {SZ{1'b0}}));
            h_queue: assert({1'b0, out_wr} == ({1'b0, out_rd} + out_n[QW:0]) % MAX_OUT[QW:0]);
            h_offered_queued: assert(!m_arvalid || out_n != {(OW + 1){1'b0}});
            h_head_len: assert(f_bursts == {(OW + 1){1'b0}} || {1'b0, head_len} < MAX_BURST[8:0]);
        end
    // Every burst in the queue is of a legal length, not only its head:
    // each becomes the head in turn.
    genvar f_k;
    generate
        for (f_k = 0; f_k < MAX_OUT; f_k = f_k + 1) begin : f_entry
            wire [7:0] f_age = (f_k[7:0] + MAX_OUT[7:0] - {{(8 - QW){1'b0}}, out_rd}) % MAX_OUT[7:0];
            always @(*)
                if (f_past_valid && !rst && f_age < {{(7 - OW){1'b0}}, out_n})
                    assert({1'b0, out_q[f_k][7:0]} < MAX_BURST[8:0]);
        end
    endgenerate

    // Reachability (scripts/formal): a command of several bursts handed
    // back whole.
    reg f_cut = 1'b0;
    always @(posedge clk)
        f_cut <= !rst && (f_cut || (issue && len != {1'b0, left} && busy));
    (* keep *) wire f_reach = f_past_valid && !rst && f_cut && rd_valid && rd_ready && rd_last;
    (* keep *) wire f_unreached = !f_reach;
`endif
endmodule

`default_nettype wire
