// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_ps, for linting only (scripts/rtl-lint): the ports of the PS's
// block design as rtl/vivado/bd/ps_<board>.tcl makes them and
// rtl/top/fabric_top.v uses them, so that Verilator can check the board's
// top. Not the design: Vivado generates the real one, and nothing else
// reads this file.

`default_nettype none

module fabric_ps #(
    parameter integer DAW = 40
) (
    output wire            pl_clk,
    output wire            pl_resetn,
    input  wire            irq,
    output wire [DAW-1:0]  M_AXI_SHELL_awaddr,
    output wire            M_AXI_SHELL_awvalid,
    input  wire            M_AXI_SHELL_awready,
    output wire [31:0]     M_AXI_SHELL_wdata,
    output wire [3:0]      M_AXI_SHELL_wstrb,
    output wire            M_AXI_SHELL_wvalid,
    input  wire            M_AXI_SHELL_wready,
    input  wire [1:0]      M_AXI_SHELL_bresp,
    input  wire            M_AXI_SHELL_bvalid,
    output wire            M_AXI_SHELL_bready,
    output wire [DAW-1:0]  M_AXI_SHELL_araddr,
    output wire            M_AXI_SHELL_arvalid,
    input  wire            M_AXI_SHELL_arready,
    input  wire [31:0]     M_AXI_SHELL_rdata,
    input  wire [1:0]      M_AXI_SHELL_rresp,
    input  wire            M_AXI_SHELL_rvalid,
    output wire            M_AXI_SHELL_rready,
    output wire [DAW-1:0]  M_AXI_DCP0_awaddr,
    output wire            M_AXI_DCP0_awvalid,
    input  wire            M_AXI_DCP0_awready,
    output wire [31:0]     M_AXI_DCP0_wdata,
    output wire [3:0]      M_AXI_DCP0_wstrb,
    output wire            M_AXI_DCP0_wvalid,
    input  wire            M_AXI_DCP0_wready,
    input  wire [1:0]      M_AXI_DCP0_bresp,
    input  wire            M_AXI_DCP0_bvalid,
    output wire            M_AXI_DCP0_bready,
    output wire [DAW-1:0]  M_AXI_DCP0_araddr,
    output wire            M_AXI_DCP0_arvalid,
    input  wire            M_AXI_DCP0_arready,
    input  wire [31:0]     M_AXI_DCP0_rdata,
    input  wire [1:0]      M_AXI_DCP0_rresp,
    input  wire            M_AXI_DCP0_rvalid,
    output wire            M_AXI_DCP0_rready,
    output wire [DAW-1:0]  M_AXI_DCP1_awaddr,
    output wire            M_AXI_DCP1_awvalid,
    input  wire            M_AXI_DCP1_awready,
    output wire [31:0]     M_AXI_DCP1_wdata,
    output wire [3:0]      M_AXI_DCP1_wstrb,
    output wire            M_AXI_DCP1_wvalid,
    input  wire            M_AXI_DCP1_wready,
    input  wire [1:0]      M_AXI_DCP1_bresp,
    input  wire            M_AXI_DCP1_bvalid,
    output wire            M_AXI_DCP1_bready,
    output wire [DAW-1:0]  M_AXI_DCP1_araddr,
    output wire            M_AXI_DCP1_arvalid,
    input  wire            M_AXI_DCP1_arready,
    input  wire [31:0]     M_AXI_DCP1_rdata,
    input  wire [1:0]      M_AXI_DCP1_rresp,
    input  wire            M_AXI_DCP1_rvalid,
    output wire            M_AXI_DCP1_rready,
    input  wire [DAW-1:0]  S_AXI_HP_araddr,
    input  wire [7:0]      S_AXI_HP_arlen,
    input  wire [2:0]      S_AXI_HP_arsize,
    input  wire [1:0]      S_AXI_HP_arburst,
    input  wire            S_AXI_HP_arvalid,
    output wire            S_AXI_HP_arready,
    output wire [31:0]     S_AXI_HP_rdata,
    output wire [1:0]      S_AXI_HP_rresp,
    output wire            S_AXI_HP_rlast,
    output wire            S_AXI_HP_rvalid,
    input  wire            S_AXI_HP_rready,
    input  wire [DAW-1:0]  S_AXI_HP_awaddr,
    input  wire [7:0]      S_AXI_HP_awlen,
    input  wire [2:0]      S_AXI_HP_awsize,
    input  wire [1:0]      S_AXI_HP_awburst,
    input  wire            S_AXI_HP_awvalid,
    output wire            S_AXI_HP_awready,
    input  wire [31:0]     S_AXI_HP_wdata,
    input  wire [3:0]      S_AXI_HP_wstrb,
    input  wire            S_AXI_HP_wlast,
    input  wire            S_AXI_HP_wvalid,
    output wire            S_AXI_HP_wready,
    output wire [1:0]      S_AXI_HP_bresp,
    output wire            S_AXI_HP_bvalid,
    input  wire            S_AXI_HP_bready,
    input  wire [DAW-1:0]  S_AXI_E0_araddr,
    input  wire [7:0]      S_AXI_E0_arlen,
    input  wire [2:0]      S_AXI_E0_arsize,
    input  wire [1:0]      S_AXI_E0_arburst,
    input  wire            S_AXI_E0_arvalid,
    output wire            S_AXI_E0_arready,
    output wire [63:0]     S_AXI_E0_rdata,
    output wire [1:0]      S_AXI_E0_rresp,
    output wire            S_AXI_E0_rlast,
    output wire            S_AXI_E0_rvalid,
    input  wire            S_AXI_E0_rready,
    input  wire [DAW-1:0]  S_AXI_E0_awaddr,
    input  wire [7:0]      S_AXI_E0_awlen,
    input  wire [2:0]      S_AXI_E0_awsize,
    input  wire [1:0]      S_AXI_E0_awburst,
    input  wire            S_AXI_E0_awvalid,
    output wire            S_AXI_E0_awready,
    input  wire [63:0]     S_AXI_E0_wdata,
    input  wire [7:0]      S_AXI_E0_wstrb,
    input  wire            S_AXI_E0_wlast,
    input  wire            S_AXI_E0_wvalid,
    output wire            S_AXI_E0_wready,
    output wire [1:0]      S_AXI_E0_bresp,
    output wire            S_AXI_E0_bvalid,
    input  wire            S_AXI_E0_bready,
    input  wire [DAW-1:0]  S_AXI_E1_araddr,
    input  wire [7:0]      S_AXI_E1_arlen,
    input  wire [2:0]      S_AXI_E1_arsize,
    input  wire [1:0]      S_AXI_E1_arburst,
    input  wire            S_AXI_E1_arvalid,
    output wire            S_AXI_E1_arready,
    output wire [63:0]     S_AXI_E1_rdata,
    output wire [1:0]      S_AXI_E1_rresp,
    output wire            S_AXI_E1_rlast,
    output wire            S_AXI_E1_rvalid,
    input  wire            S_AXI_E1_rready,
    input  wire [DAW-1:0]  S_AXI_E1_awaddr,
    input  wire [7:0]      S_AXI_E1_awlen,
    input  wire [2:0]      S_AXI_E1_awsize,
    input  wire [1:0]      S_AXI_E1_awburst,
    input  wire            S_AXI_E1_awvalid,
    output wire            S_AXI_E1_awready,
    input  wire [63:0]     S_AXI_E1_wdata,
    input  wire [7:0]      S_AXI_E1_wstrb,
    input  wire            S_AXI_E1_wlast,
    input  wire            S_AXI_E1_wvalid,
    output wire            S_AXI_E1_wready,
    output wire [1:0]      S_AXI_E1_bresp,
    output wire            S_AXI_E1_bvalid,
    input  wire            S_AXI_E1_bready
);
    assign pl_clk = 0;
    assign pl_resetn = 0;
    assign M_AXI_SHELL_awaddr = 0;
    assign M_AXI_SHELL_awvalid = 0;
    assign M_AXI_SHELL_wdata = 0;
    assign M_AXI_SHELL_wstrb = 0;
    assign M_AXI_SHELL_wvalid = 0;
    assign M_AXI_SHELL_bready = 0;
    assign M_AXI_SHELL_araddr = 0;
    assign M_AXI_SHELL_arvalid = 0;
    assign M_AXI_SHELL_rready = 0;
    assign M_AXI_DCP0_awaddr = 0;
    assign M_AXI_DCP0_awvalid = 0;
    assign M_AXI_DCP0_wdata = 0;
    assign M_AXI_DCP0_wstrb = 0;
    assign M_AXI_DCP0_wvalid = 0;
    assign M_AXI_DCP0_bready = 0;
    assign M_AXI_DCP0_araddr = 0;
    assign M_AXI_DCP0_arvalid = 0;
    assign M_AXI_DCP0_rready = 0;
    assign M_AXI_DCP1_awaddr = 0;
    assign M_AXI_DCP1_awvalid = 0;
    assign M_AXI_DCP1_wdata = 0;
    assign M_AXI_DCP1_wstrb = 0;
    assign M_AXI_DCP1_wvalid = 0;
    assign M_AXI_DCP1_bready = 0;
    assign M_AXI_DCP1_araddr = 0;
    assign M_AXI_DCP1_arvalid = 0;
    assign M_AXI_DCP1_rready = 0;
    assign S_AXI_HP_arready = 0;
    assign S_AXI_HP_rdata = 0;
    assign S_AXI_HP_rresp = 0;
    assign S_AXI_HP_rlast = 0;
    assign S_AXI_HP_rvalid = 0;
    assign S_AXI_HP_awready = 0;
    assign S_AXI_HP_wready = 0;
    assign S_AXI_HP_bresp = 0;
    assign S_AXI_HP_bvalid = 0;
    assign S_AXI_E0_arready = 0;
    assign S_AXI_E0_rdata = 0;
    assign S_AXI_E0_rresp = 0;
    assign S_AXI_E0_rlast = 0;
    assign S_AXI_E0_rvalid = 0;
    assign S_AXI_E0_awready = 0;
    assign S_AXI_E0_wready = 0;
    assign S_AXI_E0_bresp = 0;
    assign S_AXI_E0_bvalid = 0;
    assign S_AXI_E1_arready = 0;
    assign S_AXI_E1_rdata = 0;
    assign S_AXI_E1_rresp = 0;
    assign S_AXI_E1_rlast = 0;
    assign S_AXI_E1_rvalid = 0;
    assign S_AXI_E1_awready = 0;
    assign S_AXI_E1_wready = 0;
    assign S_AXI_E1_bresp = 0;
    assign S_AXI_E1_bvalid = 0;
    wire unused_inputs = ^{irq, M_AXI_SHELL_awready, M_AXI_SHELL_wready, M_AXI_SHELL_bresp, M_AXI_SHELL_bvalid, M_AXI_SHELL_arready, M_AXI_SHELL_rdata, M_AXI_SHELL_rresp, M_AXI_SHELL_rvalid, M_AXI_DCP0_awready, M_AXI_DCP0_wready, M_AXI_DCP0_bresp, M_AXI_DCP0_bvalid, M_AXI_DCP0_arready, M_AXI_DCP0_rdata, M_AXI_DCP0_rresp, M_AXI_DCP0_rvalid, M_AXI_DCP1_awready, M_AXI_DCP1_wready, M_AXI_DCP1_bresp, M_AXI_DCP1_bvalid, M_AXI_DCP1_arready, M_AXI_DCP1_rdata, M_AXI_DCP1_rresp, M_AXI_DCP1_rvalid, S_AXI_HP_araddr, S_AXI_HP_arlen, S_AXI_HP_arsize, S_AXI_HP_arburst, S_AXI_HP_arvalid, S_AXI_HP_rready, S_AXI_HP_awaddr, S_AXI_HP_awlen, S_AXI_HP_awsize, S_AXI_HP_awburst, S_AXI_HP_awvalid, S_AXI_HP_wdata, S_AXI_HP_wstrb, S_AXI_HP_wlast, S_AXI_HP_wvalid, S_AXI_HP_bready, S_AXI_E0_araddr, S_AXI_E0_arlen, S_AXI_E0_arsize, S_AXI_E0_arburst, S_AXI_E0_arvalid, S_AXI_E0_rready, S_AXI_E0_awaddr, S_AXI_E0_awlen, S_AXI_E0_awsize, S_AXI_E0_awburst, S_AXI_E0_awvalid, S_AXI_E0_wdata, S_AXI_E0_wstrb, S_AXI_E0_wlast, S_AXI_E0_wvalid, S_AXI_E0_bready, S_AXI_E1_araddr, S_AXI_E1_arlen, S_AXI_E1_arsize, S_AXI_E1_arburst, S_AXI_E1_arvalid, S_AXI_E1_rready, S_AXI_E1_awaddr, S_AXI_E1_awlen, S_AXI_E1_awsize, S_AXI_E1_awburst, S_AXI_E1_awvalid, S_AXI_E1_wdata, S_AXI_E1_wstrb, S_AXI_E1_wlast, S_AXI_E1_wvalid, S_AXI_E1_bready};
endmodule

`default_nettype wire
