// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_decoupler: one PR slot's decoupler, with the semantics of Xilinx's
// DFX Decoupler (PG375) and the register Linux's xlnx,pr-decoupler driver
// drives (drivers/fpga/xilinx-pr-decoupler.c: offset 0, write 1 to decouple
// and 0 to couple; reading it back gives the same bit).
//
// While decoupled, every signal from the slot to the shell is driven to a
// constant 0 and every handshake from the shell to the slot is held low, so
// no transaction starts or completes in either direction; the decoupler
// completes none itself. Whatever the slot's logic does while it is being
// reprogrammed cannot reach the shell. The decoupler comes out of reset
// coupled, as the IP does.

`default_nettype none

module fabric_decoupler #(
    parameter integer REQ_W = 117,      // a step: a, b, draw, greedy, inv_t
    parameter integer RSP_W = 33        // its answer: token, fault
) (
    input  wire             clk,
    input  wire             rst,

    // Its register window (AXI4-Lite, 4 KiB, one register).
    input  wire             s_awvalid,
    output wire             s_awready,
    input  wire [11:0]      s_awaddr,
    input  wire             s_wvalid,
    output wire             s_wready,
    input  wire [31:0]      s_wdata,
    input  wire [3:0]       s_wstrb,
    output wire             s_bvalid,
    input  wire             s_bready,
    output wire [1:0]       s_bresp,
    input  wire             s_arvalid,
    output wire             s_arready,
    input  wire [11:0]      s_araddr,
    output wire             s_rvalid,
    input  wire             s_rready,
    output wire [31:0]      s_rdata,
    output wire [1:0]       s_rresp,

    output reg              decoupled,

    // Shell side.
    input  wire             sh_req_valid,
    output wire             sh_req_ready,
    input  wire [REQ_W-1:0] sh_req_data,
    output wire             sh_rsp_valid,
    input  wire             sh_rsp_ready,
    output wire [RSP_W-1:0] sh_rsp_data,
    input  wire             sh_reload,
    output wire             sh_present,
    output wire             sh_table_done,
    output wire             sh_table_ok,
    output wire [255:0]     sh_identity,

    // Slot side.
    output wire             rp_req_valid,
    input  wire             rp_req_ready,
    output wire [REQ_W-1:0] rp_req_data,
    input  wire             rp_rsp_valid,
    output wire             rp_rsp_ready,
    input  wire [RSP_W-1:0] rp_rsp_data,
    output wire             rp_reload,
    input  wire             rp_present,
    input  wire             rp_table_done,
    input  wire             rp_table_ok,
    input  wire [255:0]     rp_identity
);
    wire        reg_we, reg_re;
    wire [11:0] reg_waddr, reg_raddr;
    wire [31:0] reg_wdata;
    reg  [31:0] reg_rdata;
    wire        unused_wdata = ^reg_wdata[31:1];

    fabric_axil #(.AW(12)) regs (
        .clk(clk), .rst(rst),
        .s_awvalid(s_awvalid), .s_awready(s_awready), .s_awaddr(s_awaddr),
        .s_wvalid(s_wvalid), .s_wready(s_wready), .s_wdata(s_wdata), .s_wstrb(s_wstrb),
        .s_bvalid(s_bvalid), .s_bready(s_bready), .s_bresp(s_bresp),
        .s_arvalid(s_arvalid), .s_arready(s_arready), .s_araddr(s_araddr),
        .s_rvalid(s_rvalid), .s_rready(s_rready), .s_rdata(s_rdata), .s_rresp(s_rresp),
        .reg_we(reg_we), .reg_waddr(reg_waddr), .reg_wdata(reg_wdata),
        .reg_re(reg_re), .reg_raddr(reg_raddr), .reg_rdata(reg_rdata)
    );

    always @(posedge clk) begin
        if (rst)
            decoupled <= 1'b0;
`ifndef FABRIC_BREAK_DECOUPLER
        else if (reg_we && reg_waddr == 12'h000)
            decoupled <= reg_wdata[0];
`endif
        if (reg_re)
            reg_rdata <= (reg_raddr == 12'h000) ? {31'd0, decoupled} : 32'd0;
    end

    assign sh_req_ready = !decoupled && rp_req_ready;
    assign sh_rsp_valid = !decoupled && rp_rsp_valid;
    assign sh_rsp_data = decoupled ? {RSP_W{1'b0}} : rp_rsp_data;
    assign sh_present = !decoupled && rp_present;
    assign sh_table_done = !decoupled && rp_table_done;
    assign sh_table_ok = !decoupled && rp_table_ok;
    assign sh_identity = decoupled ? 256'd0 : rp_identity;
    assign rp_req_valid = !decoupled && sh_req_valid;
    assign rp_req_data = sh_req_data;
    assign rp_rsp_ready = !decoupled && sh_rsp_ready;
    assign rp_reload = !decoupled && sh_reload;
endmodule

`default_nettype wire
