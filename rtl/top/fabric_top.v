// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_top: the board's top for the Vivado flow (rtl/vivado/): the PS's
// block design fabric_ps (its clock, reset, the three register windows, the
// shell's HP port and each slot's engine's, the interrupt), the static
// shell with a decoupler per slot, and the two reconfigurable partitions,
// cells slot0.rm and slot1.rm (the instance rm of generate blocks slot0 and
// slot1). Each engine is a reconfigurable module; models are tables in DDR
// that the engines read (contract 2.0). The co-simulation's top is
// rtl/sim/fabric_cosim.v, the same shell, decouplers and slots without the
// PS.
//
// SLOT0_MODULE and SLOT1_MODULE choose the module each partition holds in
// this configuration: 1 the trigram engine (fabric_slot), 2 the transformer
// (fabric_slot_lm); both have the partition's ports. The default, a trigram
// engine in each, is the design as shipped, and the one the DFX flow
// synthesizes the static from: there each partition is a black box of
// fabric_slot, and every engine is synthesized out of context under that
// name (UG909: every module of a partition has its black box's name), so
// the flow never sets these. A whole-design synthesis sets them to build
// the shell with a transformer in a slot (issue 31's fit target), with
// rtl/engine/lm among its sources.

`default_nettype none

module fabric_top #(
    parameter integer CLK_MHZ = 200,
    parameter integer DAW = 40,      // the HP port's address bits
    parameter integer SLOT0_MODULE = 1,
    parameter integer SLOT1_MODULE = 1
) ();
    wire clk, resetn;
    wire rst = !resetn;

    // The register windows: the shell's, then each decoupler's.
    wire [DAW-1:0] sh_awaddr, sh_araddr, d0_awaddr, d0_araddr, d1_awaddr, d1_araddr;
    // Each window is 4 KiB: the bits above its offset select it in the
    // PS's interconnect, not here.
    wire unused_window_bits = ^{sh_awaddr[DAW-1:12], sh_araddr[DAW-1:12], d0_awaddr[DAW-1:12],
                               d0_araddr[DAW-1:12], d1_awaddr[DAW-1:12], d1_araddr[DAW-1:12]};
    wire [2:0]     w_awvalid, w_awready, w_wvalid, w_wready, w_bvalid, w_bready;
    wire [2:0]     w_arvalid, w_arready, w_rvalid, w_rready;
    wire [31:0]    w_wdata [0:2];
    wire [3:0]     w_wstrb [0:2];
    wire [1:0]     w_bresp [0:2];
    wire [31:0]    w_rdata [0:2];
    wire [1:0]     w_rresp [0:2];

    wire [DAW-1:0] hp_araddr, hp_awaddr;
    wire [7:0]     hp_arlen, hp_awlen;
    wire [2:0]     hp_arsize, hp_awsize;
    wire [1:0]     hp_arburst, hp_awburst, hp_rresp, hp_bresp;
    wire           hp_arvalid, hp_arready, hp_rlast, hp_rvalid, hp_rready;
    wire           hp_awvalid, hp_awready, hp_wlast, hp_wvalid, hp_wready;
    wire           hp_bvalid, hp_bready;
    wire [31:0]    hp_rdata, hp_wdata;
    wire [3:0]     hp_wstrb;
    wire           irq;

    // Each slot's engine's HP port, the PS's side of its decoupler: INCR
    // read bursts and single-beat writes, 64 bits (fabric_slot.v).
    wire [DAW-1:0] e_araddr [0:1];
    wire [7:0]     e_arlen [0:1];
    wire [1:0]     e_arvalid, e_arready, e_rlast, e_rvalid, e_rready;
    wire [63:0]    e_rdata [0:1];
    wire [1:0]     e_rresp [0:1];
    wire [DAW-1:0] e_awaddr [0:1];
    wire [1:0]     e_awvalid, e_awready, e_wvalid, e_wready, e_bvalid, e_bready;
    wire [63:0]    e_wdata [0:1];
    wire [7:0]     e_wstrb [0:1];
    wire [1:0]     e_bresp [0:1];

    fabric_ps ps (
        .pl_clk(clk), .pl_resetn(resetn), .irq(irq),
        .M_AXI_SHELL_awaddr(sh_awaddr), .M_AXI_SHELL_awvalid(w_awvalid[0]),
        .M_AXI_SHELL_awready(w_awready[0]), .M_AXI_SHELL_wdata(w_wdata[0]),
        .M_AXI_SHELL_wstrb(w_wstrb[0]), .M_AXI_SHELL_wvalid(w_wvalid[0]),
        .M_AXI_SHELL_wready(w_wready[0]), .M_AXI_SHELL_bresp(w_bresp[0]),
        .M_AXI_SHELL_bvalid(w_bvalid[0]), .M_AXI_SHELL_bready(w_bready[0]),
        .M_AXI_SHELL_araddr(sh_araddr), .M_AXI_SHELL_arvalid(w_arvalid[0]),
        .M_AXI_SHELL_arready(w_arready[0]), .M_AXI_SHELL_rdata(w_rdata[0]),
        .M_AXI_SHELL_rresp(w_rresp[0]), .M_AXI_SHELL_rvalid(w_rvalid[0]),
        .M_AXI_SHELL_rready(w_rready[0]),
        .M_AXI_DCP0_awaddr(d0_awaddr), .M_AXI_DCP0_awvalid(w_awvalid[1]),
        .M_AXI_DCP0_awready(w_awready[1]), .M_AXI_DCP0_wdata(w_wdata[1]),
        .M_AXI_DCP0_wstrb(w_wstrb[1]), .M_AXI_DCP0_wvalid(w_wvalid[1]),
        .M_AXI_DCP0_wready(w_wready[1]), .M_AXI_DCP0_bresp(w_bresp[1]),
        .M_AXI_DCP0_bvalid(w_bvalid[1]), .M_AXI_DCP0_bready(w_bready[1]),
        .M_AXI_DCP0_araddr(d0_araddr), .M_AXI_DCP0_arvalid(w_arvalid[1]),
        .M_AXI_DCP0_arready(w_arready[1]), .M_AXI_DCP0_rdata(w_rdata[1]),
        .M_AXI_DCP0_rresp(w_rresp[1]), .M_AXI_DCP0_rvalid(w_rvalid[1]),
        .M_AXI_DCP0_rready(w_rready[1]),
        .M_AXI_DCP1_awaddr(d1_awaddr), .M_AXI_DCP1_awvalid(w_awvalid[2]),
        .M_AXI_DCP1_awready(w_awready[2]), .M_AXI_DCP1_wdata(w_wdata[2]),
        .M_AXI_DCP1_wstrb(w_wstrb[2]), .M_AXI_DCP1_wvalid(w_wvalid[2]),
        .M_AXI_DCP1_wready(w_wready[2]), .M_AXI_DCP1_bresp(w_bresp[2]),
        .M_AXI_DCP1_bvalid(w_bvalid[2]), .M_AXI_DCP1_bready(w_bready[2]),
        .M_AXI_DCP1_araddr(d1_araddr), .M_AXI_DCP1_arvalid(w_arvalid[2]),
        .M_AXI_DCP1_arready(w_arready[2]), .M_AXI_DCP1_rdata(w_rdata[2]),
        .M_AXI_DCP1_rresp(w_rresp[2]), .M_AXI_DCP1_rvalid(w_rvalid[2]),
        .M_AXI_DCP1_rready(w_rready[2]),
        .S_AXI_HP_araddr(hp_araddr), .S_AXI_HP_arlen(hp_arlen), .S_AXI_HP_arsize(hp_arsize),
        .S_AXI_HP_arburst(hp_arburst), .S_AXI_HP_arvalid(hp_arvalid),
        .S_AXI_HP_arready(hp_arready), .S_AXI_HP_rdata(hp_rdata), .S_AXI_HP_rresp(hp_rresp),
        .S_AXI_HP_rlast(hp_rlast), .S_AXI_HP_rvalid(hp_rvalid), .S_AXI_HP_rready(hp_rready),
        .S_AXI_HP_awaddr(hp_awaddr), .S_AXI_HP_awlen(hp_awlen), .S_AXI_HP_awsize(hp_awsize),
        .S_AXI_HP_awburst(hp_awburst), .S_AXI_HP_awvalid(hp_awvalid),
        .S_AXI_HP_awready(hp_awready), .S_AXI_HP_wdata(hp_wdata), .S_AXI_HP_wstrb(hp_wstrb),
        .S_AXI_HP_wlast(hp_wlast), .S_AXI_HP_wvalid(hp_wvalid), .S_AXI_HP_wready(hp_wready),
        .S_AXI_HP_bresp(hp_bresp), .S_AXI_HP_bvalid(hp_bvalid), .S_AXI_HP_bready(hp_bready),
        // The engines' ports: reads INCR bursts of 8-byte beats (ARSIZE 3),
        // writes a beat each (AWLEN 0, WLAST high, AWSIZE 3, INCR).
        .S_AXI_E0_araddr(e_araddr[0]), .S_AXI_E0_arlen(e_arlen[0]),
        .S_AXI_E0_arsize(3'd3), .S_AXI_E0_arburst(2'b01), .S_AXI_E0_arvalid(e_arvalid[0]),
        .S_AXI_E0_arready(e_arready[0]), .S_AXI_E0_rdata(e_rdata[0]),
        .S_AXI_E0_rresp(e_rresp[0]), .S_AXI_E0_rlast(e_rlast[0]),
        .S_AXI_E0_rvalid(e_rvalid[0]), .S_AXI_E0_rready(e_rready[0]),
        .S_AXI_E0_awaddr(e_awaddr[0]), .S_AXI_E0_awlen(8'd0), .S_AXI_E0_awsize(3'd3),
        .S_AXI_E0_awburst(2'b01), .S_AXI_E0_awvalid(e_awvalid[0]),
        .S_AXI_E0_awready(e_awready[0]), .S_AXI_E0_wdata(e_wdata[0]),
        .S_AXI_E0_wstrb(e_wstrb[0]), .S_AXI_E0_wlast(1'b1), .S_AXI_E0_wvalid(e_wvalid[0]),
        .S_AXI_E0_wready(e_wready[0]), .S_AXI_E0_bresp(e_bresp[0]),
        .S_AXI_E0_bvalid(e_bvalid[0]), .S_AXI_E0_bready(e_bready[0]),
        .S_AXI_E1_araddr(e_araddr[1]), .S_AXI_E1_arlen(e_arlen[1]),
        .S_AXI_E1_arsize(3'd3), .S_AXI_E1_arburst(2'b01), .S_AXI_E1_arvalid(e_arvalid[1]),
        .S_AXI_E1_arready(e_arready[1]), .S_AXI_E1_rdata(e_rdata[1]),
        .S_AXI_E1_rresp(e_rresp[1]), .S_AXI_E1_rlast(e_rlast[1]),
        .S_AXI_E1_rvalid(e_rvalid[1]), .S_AXI_E1_rready(e_rready[1]),
        .S_AXI_E1_awaddr(e_awaddr[1]), .S_AXI_E1_awlen(8'd0), .S_AXI_E1_awsize(3'd3),
        .S_AXI_E1_awburst(2'b01), .S_AXI_E1_awvalid(e_awvalid[1]),
        .S_AXI_E1_awready(e_awready[1]), .S_AXI_E1_wdata(e_wdata[1]),
        .S_AXI_E1_wstrb(e_wstrb[1]), .S_AXI_E1_wlast(1'b1), .S_AXI_E1_wvalid(e_wvalid[1]),
        .S_AXI_E1_wready(e_wready[1]), .S_AXI_E1_bresp(e_bresp[1]),
        .S_AXI_E1_bvalid(e_bvalid[1]), .S_AXI_E1_bready(e_bready[1])
    );

    // The slots' ports, shell side (through the decouplers) and slot side.
    localparam integer REQ_W = 142 + DAW;
    localparam integer RSP_W = 43;
    localparam integer LANES = 4;    // the contexts a slot decodes at once
    wire [1:0]         req_valid, req_ready, rsp_valid, rsp_ready, reload, decoupled;
    wire [1:0]         tbl_start, tbl_done, reading, draining, progress;
    wire [2*REQ_W-1:0] req_data;
    wire [2*RSP_W-1:0] rsp_data;
    wire [63:0]        engine, tbl_region, tbl_crc;
    wire [2*DAW-1:0]   tbl_base;
    wire [3:0]         tbl_result;
    wire [511:0]       identity;

    fabric_shell #(.CLK_MHZ(CLK_MHZ), .DAW(DAW), .LANES(LANES)) shell (
        .clk(clk), .rst(rst),
        .s_awvalid(w_awvalid[0]), .s_awready(w_awready[0]), .s_awaddr(sh_awaddr[11:0]),
        .s_wvalid(w_wvalid[0]), .s_wready(w_wready[0]), .s_wdata(w_wdata[0]),
        .s_wstrb(w_wstrb[0]), .s_bvalid(w_bvalid[0]), .s_bready(w_bready[0]),
        .s_bresp(w_bresp[0]), .s_arvalid(w_arvalid[0]), .s_arready(w_arready[0]),
        .s_araddr(sh_araddr[11:0]), .s_rvalid(w_rvalid[0]), .s_rready(w_rready[0]),
        .s_rdata(w_rdata[0]), .s_rresp(w_rresp[0]),
        .m_araddr(hp_araddr), .m_arlen(hp_arlen), .m_arsize(hp_arsize), .m_arburst(hp_arburst),
        .m_arvalid(hp_arvalid), .m_arready(hp_arready), .m_rdata(hp_rdata), .m_rresp(hp_rresp),
        .m_rlast(hp_rlast), .m_rvalid(hp_rvalid), .m_rready(hp_rready),
        .m_awaddr(hp_awaddr), .m_awlen(hp_awlen), .m_awsize(hp_awsize), .m_awburst(hp_awburst),
        .m_awvalid(hp_awvalid), .m_awready(hp_awready), .m_wdata(hp_wdata), .m_wstrb(hp_wstrb),
        .m_wlast(hp_wlast), .m_wvalid(hp_wvalid), .m_wready(hp_wready),
        .m_bresp(hp_bresp), .m_bvalid(hp_bvalid), .m_bready(hp_bready),
        .irq(irq),
        .slot_req_valid(req_valid), .slot_req_ready(req_ready), .slot_req_data(req_data),
        .slot_rsp_valid(rsp_valid), .slot_rsp_ready(rsp_ready), .slot_rsp_data(rsp_data),
        .slot_reload(reload), .slot_engine(engine), .slot_tbl_start(tbl_start),
        .slot_tbl_base(tbl_base), .slot_tbl_region(tbl_region), .slot_tbl_done(tbl_done),
        .slot_tbl_result(tbl_result), .slot_tbl_crc(tbl_crc), .slot_identity(identity),
        .slot_reading(reading), .slot_decoupled(decoupled), .slot_draining(draining),
        .slot_progress(progress),
        // No gate on a board: the watchdog counts every cycle.
        .slot_hold(2'b00)
    );

    wire [1:0]         rp_req_valid, rp_req_ready, rp_rsp_valid, rp_rsp_ready, rp_reload;
    wire [1:0]         rp_tbl_start, rp_tbl_done, rp_reading;
    wire [2*REQ_W-1:0] rp_req_data;
    wire [2*RSP_W-1:0] rp_rsp_data;
    wire [63:0]        rp_engine, rp_tbl_region, rp_tbl_crc;
    wire [2*DAW-1:0]   rp_tbl_base;
    wire [3:0]         rp_tbl_result;
    wire [511:0]       rp_identity;
    wire [DAW-1:0]     rp_araddr [0:1];
    wire [7:0]         rp_arlen [0:1];
    wire [1:0]         rp_arvalid, rp_arready, rp_rlast, rp_rvalid, rp_rready;
    wire [63:0]        rp_rdata [0:1];
    wire [1:0]         rp_rresp [0:1];
    wire [DAW-1:0]     rp_awaddr [0:1];
    wire [1:0]         rp_awvalid, rp_awready, rp_wvalid, rp_wready, rp_bvalid, rp_bready;
    wire [63:0]        rp_wdata [0:1];
    wire [7:0]         rp_wstrb [0:1];
    wire [1:0]         rp_bresp [0:1];

    fabric_decoupler #(.DAW(DAW)) dcp0 (
        .clk(clk), .rst(rst),
        .s_awvalid(w_awvalid[1]), .s_awready(w_awready[1]), .s_awaddr(d0_awaddr[11:0]),
        .s_wvalid(w_wvalid[1]), .s_wready(w_wready[1]), .s_wdata(w_wdata[1]),
        .s_wstrb(w_wstrb[1]), .s_bvalid(w_bvalid[1]), .s_bready(w_bready[1]),
        .s_bresp(w_bresp[1]), .s_arvalid(w_arvalid[1]), .s_arready(w_arready[1]),
        .s_araddr(d0_araddr[11:0]), .s_rvalid(w_rvalid[1]), .s_rready(w_rready[1]),
        .s_rdata(w_rdata[1]), .s_rresp(w_rresp[1]), .decoupled(decoupled[0]),
        .draining(draining[0]), .progress(progress[0]),
        .sh_req_valid(req_valid[0]), .sh_req_ready(req_ready[0]),
        .sh_req_data(req_data[0 +: REQ_W]),
        .sh_rsp_valid(rsp_valid[0]), .sh_rsp_ready(rsp_ready[0]),
        .sh_rsp_data(rsp_data[0 +: RSP_W]),
        .sh_reload(reload[0]), .sh_engine(engine[31:0]), .sh_tbl_start(tbl_start[0]),
        .sh_tbl_base(tbl_base[0 +: DAW]), .sh_tbl_region(tbl_region[31:0]),
        .sh_tbl_done(tbl_done[0]), .sh_tbl_result(tbl_result[1:0]),
        .sh_tbl_crc(tbl_crc[31:0]), .sh_identity(identity[255:0]), .sh_reading(reading[0]),
        .ps_araddr(e_araddr[0]), .ps_arlen(e_arlen[0]), .ps_arvalid(e_arvalid[0]),
        .ps_arready(e_arready[0]), .ps_rdata(e_rdata[0]), .ps_rresp(e_rresp[0]),
        .ps_rlast(e_rlast[0]), .ps_rvalid(e_rvalid[0]), .ps_rready(e_rready[0]),
        .ps_awaddr(e_awaddr[0]), .ps_awvalid(e_awvalid[0]), .ps_awready(e_awready[0]),
        .ps_wdata(e_wdata[0]), .ps_wstrb(e_wstrb[0]), .ps_wvalid(e_wvalid[0]),
        .ps_wready(e_wready[0]), .ps_bresp(e_bresp[0]), .ps_bvalid(e_bvalid[0]),
        .ps_bready(e_bready[0]),
        .rp_req_valid(rp_req_valid[0]), .rp_req_ready(rp_req_ready[0]),
        .rp_req_data(rp_req_data[0 +: REQ_W]),
        .rp_rsp_valid(rp_rsp_valid[0]), .rp_rsp_ready(rp_rsp_ready[0]),
        .rp_rsp_data(rp_rsp_data[0 +: RSP_W]),
        .rp_reload(rp_reload[0]), .rp_engine(rp_engine[31:0]),
        .rp_tbl_start(rp_tbl_start[0]), .rp_tbl_base(rp_tbl_base[0 +: DAW]),
        .rp_tbl_region(rp_tbl_region[31:0]), .rp_tbl_done(rp_tbl_done[0]),
        .rp_tbl_result(rp_tbl_result[1:0]), .rp_tbl_crc(rp_tbl_crc[31:0]),
        .rp_identity(rp_identity[255:0]), .rp_reading(rp_reading[0]),
        .rp_araddr(rp_araddr[0]), .rp_arlen(rp_arlen[0]), .rp_arvalid(rp_arvalid[0]),
        .rp_arready(rp_arready[0]), .rp_rdata(rp_rdata[0]), .rp_rresp(rp_rresp[0]),
        .rp_rlast(rp_rlast[0]), .rp_rvalid(rp_rvalid[0]), .rp_rready(rp_rready[0]),
        .rp_awaddr(rp_awaddr[0]), .rp_awvalid(rp_awvalid[0]), .rp_awready(rp_awready[0]),
        .rp_wdata(rp_wdata[0]), .rp_wstrb(rp_wstrb[0]), .rp_wvalid(rp_wvalid[0]),
        .rp_wready(rp_wready[0]), .rp_bresp(rp_bresp[0]), .rp_bvalid(rp_bvalid[0]),
        .rp_bready(rp_bready[0])
    );

    fabric_decoupler #(.DAW(DAW)) dcp1 (
        .clk(clk), .rst(rst),
        .s_awvalid(w_awvalid[2]), .s_awready(w_awready[2]), .s_awaddr(d1_awaddr[11:0]),
        .s_wvalid(w_wvalid[2]), .s_wready(w_wready[2]), .s_wdata(w_wdata[2]),
        .s_wstrb(w_wstrb[2]), .s_bvalid(w_bvalid[2]), .s_bready(w_bready[2]),
        .s_bresp(w_bresp[2]), .s_arvalid(w_arvalid[2]), .s_arready(w_arready[2]),
        .s_araddr(d1_araddr[11:0]), .s_rvalid(w_rvalid[2]), .s_rready(w_rready[2]),
        .s_rdata(w_rdata[2]), .s_rresp(w_rresp[2]), .decoupled(decoupled[1]),
        .draining(draining[1]), .progress(progress[1]),
        .sh_req_valid(req_valid[1]), .sh_req_ready(req_ready[1]),
        .sh_req_data(req_data[REQ_W +: REQ_W]),
        .sh_rsp_valid(rsp_valid[1]), .sh_rsp_ready(rsp_ready[1]),
        .sh_rsp_data(rsp_data[RSP_W +: RSP_W]),
        .sh_reload(reload[1]), .sh_engine(engine[63:32]), .sh_tbl_start(tbl_start[1]),
        .sh_tbl_base(tbl_base[DAW +: DAW]), .sh_tbl_region(tbl_region[63:32]),
        .sh_tbl_done(tbl_done[1]), .sh_tbl_result(tbl_result[3:2]),
        .sh_tbl_crc(tbl_crc[63:32]), .sh_identity(identity[511:256]), .sh_reading(reading[1]),
        .ps_araddr(e_araddr[1]), .ps_arlen(e_arlen[1]), .ps_arvalid(e_arvalid[1]),
        .ps_arready(e_arready[1]), .ps_rdata(e_rdata[1]), .ps_rresp(e_rresp[1]),
        .ps_rlast(e_rlast[1]), .ps_rvalid(e_rvalid[1]), .ps_rready(e_rready[1]),
        .ps_awaddr(e_awaddr[1]), .ps_awvalid(e_awvalid[1]), .ps_awready(e_awready[1]),
        .ps_wdata(e_wdata[1]), .ps_wstrb(e_wstrb[1]), .ps_wvalid(e_wvalid[1]),
        .ps_wready(e_wready[1]), .ps_bresp(e_bresp[1]), .ps_bvalid(e_bvalid[1]),
        .ps_bready(e_bready[1]),
        .rp_req_valid(rp_req_valid[1]), .rp_req_ready(rp_req_ready[1]),
        .rp_req_data(rp_req_data[REQ_W +: REQ_W]),
        .rp_rsp_valid(rp_rsp_valid[1]), .rp_rsp_ready(rp_rsp_ready[1]),
        .rp_rsp_data(rp_rsp_data[RSP_W +: RSP_W]),
        .rp_reload(rp_reload[1]), .rp_engine(rp_engine[63:32]),
        .rp_tbl_start(rp_tbl_start[1]), .rp_tbl_base(rp_tbl_base[DAW +: DAW]),
        .rp_tbl_region(rp_tbl_region[63:32]), .rp_tbl_done(rp_tbl_done[1]),
        .rp_tbl_result(rp_tbl_result[3:2]), .rp_tbl_crc(rp_tbl_crc[63:32]),
        .rp_identity(rp_identity[511:256]), .rp_reading(rp_reading[1]),
        .rp_araddr(rp_araddr[1]), .rp_arlen(rp_arlen[1]), .rp_arvalid(rp_arvalid[1]),
        .rp_arready(rp_arready[1]), .rp_rdata(rp_rdata[1]), .rp_rresp(rp_rresp[1]),
        .rp_rlast(rp_rlast[1]), .rp_rvalid(rp_rvalid[1]), .rp_rready(rp_rready[1]),
        .rp_awaddr(rp_awaddr[1]), .rp_awvalid(rp_awvalid[1]), .rp_awready(rp_awready[1]),
        .rp_wdata(rp_wdata[1]), .rp_wstrb(rp_wstrb[1]), .rp_wvalid(rp_wvalid[1]),
        .rp_wready(rp_wready[1]), .rp_bresp(rp_bresp[1]), .rp_bvalid(rp_bvalid[1]),
        .rp_bready(rp_bready[1])
    );

    // The reconfigurable partitions (HD.RECONFIGURABLE in the flow): the
    // cell rm of generate blocks slot0 and slot1, which Vivado names
    // slot0.rm and slot1.rm. A slot comes out of reset after every load
    // (RESET_AFTER_RECONFIG) and when the shell says it was reloaded. Left
    // empty (a greybox), a partition's outputs are tied to 0 (UG909), which
    // the shell reads as no engine. The transformer keeps the keys and values
    // of the shell's LANES lanes; the flow synthesizes it with its own
    // default LANES, which is this.
    generate
        // A value neither module has stops elaboration here, naming it.
        if (SLOT0_MODULE != 1 && SLOT0_MODULE != 2) begin : slot0_module_check
            fabric_top_SLOT0_MODULE_is_not_1_or_2 bad ();
        end
        if (SLOT1_MODULE != 1 && SLOT1_MODULE != 2) begin : slot1_module_check
            fabric_top_SLOT1_MODULE_is_not_1_or_2 bad ();
        end

        if (SLOT0_MODULE == 2) begin : slot0
            fabric_slot_lm #(.DAW(DAW), .LANES(LANES)) rm (
                .clk(clk), .rst(rst || rp_reload[0]),
                .req_valid(rp_req_valid[0]), .req_ready(rp_req_ready[0]),
                .req_data(rp_req_data[0 +: REQ_W]),
                .rsp_valid(rp_rsp_valid[0]), .rsp_ready(rp_rsp_ready[0]),
                .rsp_data(rp_rsp_data[0 +: RSP_W]), .engine(rp_engine[31:0]),
                .tbl_start(rp_tbl_start[0]), .tbl_base(rp_tbl_base[0 +: DAW]),
                .tbl_region(rp_tbl_region[31:0]), .tbl_done(rp_tbl_done[0]),
                .tbl_result(rp_tbl_result[1:0]), .tbl_crc(rp_tbl_crc[31:0]),
                .identity(rp_identity[255:0]), .reading(rp_reading[0]),
                .m_araddr(rp_araddr[0]), .m_arlen(rp_arlen[0]), .m_arvalid(rp_arvalid[0]),
                .m_arready(rp_arready[0]), .m_rdata(rp_rdata[0]), .m_rresp(rp_rresp[0]),
                .m_rlast(rp_rlast[0]), .m_rvalid(rp_rvalid[0]), .m_rready(rp_rready[0]),
                .m_awaddr(rp_awaddr[0]), .m_awvalid(rp_awvalid[0]), .m_awready(rp_awready[0]),
                .m_wdata(rp_wdata[0]), .m_wstrb(rp_wstrb[0]), .m_wvalid(rp_wvalid[0]),
                .m_wready(rp_wready[0]), .m_bresp(rp_bresp[0]), .m_bvalid(rp_bvalid[0]),
                .m_bready(rp_bready[0])
            );
        end else begin : slot0
            fabric_slot #(.DAW(DAW)) rm (
                .clk(clk), .rst(rst || rp_reload[0]),
                .req_valid(rp_req_valid[0]), .req_ready(rp_req_ready[0]),
                .req_data(rp_req_data[0 +: REQ_W]),
                .rsp_valid(rp_rsp_valid[0]), .rsp_ready(rp_rsp_ready[0]),
                .rsp_data(rp_rsp_data[0 +: RSP_W]), .engine(rp_engine[31:0]),
                .tbl_start(rp_tbl_start[0]), .tbl_base(rp_tbl_base[0 +: DAW]),
                .tbl_region(rp_tbl_region[31:0]), .tbl_done(rp_tbl_done[0]),
                .tbl_result(rp_tbl_result[1:0]), .tbl_crc(rp_tbl_crc[31:0]),
                .identity(rp_identity[255:0]), .reading(rp_reading[0]),
                .m_araddr(rp_araddr[0]), .m_arlen(rp_arlen[0]), .m_arvalid(rp_arvalid[0]),
                .m_arready(rp_arready[0]), .m_rdata(rp_rdata[0]), .m_rresp(rp_rresp[0]),
                .m_rlast(rp_rlast[0]), .m_rvalid(rp_rvalid[0]), .m_rready(rp_rready[0]),
                .m_awaddr(rp_awaddr[0]), .m_awvalid(rp_awvalid[0]), .m_awready(rp_awready[0]),
                .m_wdata(rp_wdata[0]), .m_wstrb(rp_wstrb[0]), .m_wvalid(rp_wvalid[0]),
                .m_wready(rp_wready[0]), .m_bresp(rp_bresp[0]), .m_bvalid(rp_bvalid[0]),
                .m_bready(rp_bready[0])
            );
        end

        if (SLOT1_MODULE == 2) begin : slot1
            fabric_slot_lm #(.DAW(DAW), .LANES(LANES)) rm (
                .clk(clk), .rst(rst || rp_reload[1]),
                .req_valid(rp_req_valid[1]), .req_ready(rp_req_ready[1]),
                .req_data(rp_req_data[REQ_W +: REQ_W]),
                .rsp_valid(rp_rsp_valid[1]), .rsp_ready(rp_rsp_ready[1]),
                .rsp_data(rp_rsp_data[RSP_W +: RSP_W]), .engine(rp_engine[63:32]),
                .tbl_start(rp_tbl_start[1]), .tbl_base(rp_tbl_base[DAW +: DAW]),
                .tbl_region(rp_tbl_region[63:32]), .tbl_done(rp_tbl_done[1]),
                .tbl_result(rp_tbl_result[3:2]), .tbl_crc(rp_tbl_crc[63:32]),
                .identity(rp_identity[511:256]), .reading(rp_reading[1]),
                .m_araddr(rp_araddr[1]), .m_arlen(rp_arlen[1]), .m_arvalid(rp_arvalid[1]),
                .m_arready(rp_arready[1]), .m_rdata(rp_rdata[1]), .m_rresp(rp_rresp[1]),
                .m_rlast(rp_rlast[1]), .m_rvalid(rp_rvalid[1]), .m_rready(rp_rready[1]),
                .m_awaddr(rp_awaddr[1]), .m_awvalid(rp_awvalid[1]), .m_awready(rp_awready[1]),
                .m_wdata(rp_wdata[1]), .m_wstrb(rp_wstrb[1]), .m_wvalid(rp_wvalid[1]),
                .m_wready(rp_wready[1]), .m_bresp(rp_bresp[1]), .m_bvalid(rp_bvalid[1]),
                .m_bready(rp_bready[1])
            );
        end else begin : slot1
            fabric_slot #(.DAW(DAW)) rm (
                .clk(clk), .rst(rst || rp_reload[1]),
                .req_valid(rp_req_valid[1]), .req_ready(rp_req_ready[1]),
                .req_data(rp_req_data[REQ_W +: REQ_W]),
                .rsp_valid(rp_rsp_valid[1]), .rsp_ready(rp_rsp_ready[1]),
                .rsp_data(rp_rsp_data[RSP_W +: RSP_W]), .engine(rp_engine[63:32]),
                .tbl_start(rp_tbl_start[1]), .tbl_base(rp_tbl_base[DAW +: DAW]),
                .tbl_region(rp_tbl_region[63:32]), .tbl_done(rp_tbl_done[1]),
                .tbl_result(rp_tbl_result[3:2]), .tbl_crc(rp_tbl_crc[63:32]),
                .identity(rp_identity[511:256]), .reading(rp_reading[1]),
                .m_araddr(rp_araddr[1]), .m_arlen(rp_arlen[1]), .m_arvalid(rp_arvalid[1]),
                .m_arready(rp_arready[1]), .m_rdata(rp_rdata[1]), .m_rresp(rp_rresp[1]),
                .m_rlast(rp_rlast[1]), .m_rvalid(rp_rvalid[1]), .m_rready(rp_rready[1]),
                .m_awaddr(rp_awaddr[1]), .m_awvalid(rp_awvalid[1]), .m_awready(rp_awready[1]),
                .m_wdata(rp_wdata[1]), .m_wstrb(rp_wstrb[1]), .m_wvalid(rp_wvalid[1]),
                .m_wready(rp_wready[1]), .m_bresp(rp_bresp[1]), .m_bvalid(rp_bvalid[1]),
                .m_bready(rp_bready[1])
            );
        end
    endgenerate
endmodule

`default_nettype wire
