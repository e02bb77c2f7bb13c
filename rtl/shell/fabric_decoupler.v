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
//
// The engine's read master (contract 2.0) passes through it to the slot's
// HP port, and the decoupler counts the bursts the PS owes (each AR taken,
// until its RLAST), as Xilinx's DFX AXI Shutdown Manager (PG377) tracks
// the transactions outstanding at a boundary. Decoupled, no read is asked
// for (ARVALID low to the PS) and none is answered to the slot (RVALID
// low to it); the beats of the bursts still owed are taken from the PS and
// dropped (RREADY high), also after the slot is coupled again, until none
// is owed: the port is never left with a burst it cannot finish, and a
// new engine never receives a beat it did not ask for (what a slot
// reprogrammed while coupled asked for, say). `draining` says so, and the
// shell waits for it before it reads what the slot holds. A slot
// decoupled with a read under way comes up torn: the shell saw the read.

`default_nettype none

module fabric_decoupler #(
    parameter integer REQ_W = 117,      // a step: a, b, draw, greedy, inv_t
    parameter integer RSP_W = 34,       // its answer: token, fault code
    parameter integer DAW = 40
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
    output wire             draining,   // bursts owed by the PS are being dropped

    // Shell side.
    input  wire             sh_req_valid,
    output wire             sh_req_ready,
    input  wire [REQ_W-1:0] sh_req_data,
    output wire             sh_rsp_valid,
    input  wire             sh_rsp_ready,
    output wire [RSP_W-1:0] sh_rsp_data,
    input  wire             sh_reload,
    output wire [31:0]      sh_engine,
    input  wire             sh_tbl_start,
    input  wire [DAW-1:0]   sh_tbl_base,
    input  wire [31:0]      sh_tbl_region,
    output wire             sh_tbl_done,
    output wire [1:0]       sh_tbl_result,
    output wire [31:0]      sh_tbl_crc,
    output wire [255:0]     sh_identity,
    output wire             sh_reading,

    // The slot's HP port, the PS's side.
    output wire [DAW-1:0]   ps_araddr,
    output wire [7:0]       ps_arlen,
    output wire             ps_arvalid,
    input  wire             ps_arready,
    input  wire [31:0]      ps_rdata,
    input  wire [1:0]       ps_rresp,
    input  wire             ps_rlast,
    input  wire             ps_rvalid,
    output wire             ps_rready,

    // Slot side.
    output wire             rp_req_valid,
    input  wire             rp_req_ready,
    output wire [REQ_W-1:0] rp_req_data,
    input  wire             rp_rsp_valid,
    output wire             rp_rsp_ready,
    input  wire [RSP_W-1:0] rp_rsp_data,
    output wire             rp_reload,
    input  wire [31:0]      rp_engine,
    output wire             rp_tbl_start,
    output wire [DAW-1:0]   rp_tbl_base,
    output wire [31:0]      rp_tbl_region,
    input  wire             rp_tbl_done,
    input  wire [1:0]       rp_tbl_result,
    input  wire [31:0]      rp_tbl_crc,
    input  wire [255:0]     rp_identity,
    input  wire             rp_reading,
    input  wire [DAW-1:0]   rp_araddr,
    input  wire [7:0]       rp_arlen,
    input  wire             rp_arvalid,
    output wire             rp_arready,
    output wire [31:0]      rp_rdata,
    output wire [1:0]       rp_rresp,
    output wire             rp_rlast,
    output wire             rp_rvalid,
    input  wire             rp_rready
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
    assign sh_engine = decoupled ? 32'd0 : rp_engine;
    assign sh_tbl_done = !decoupled && rp_tbl_done;
    assign sh_tbl_result = decoupled ? 2'd0 : rp_tbl_result;
    assign sh_tbl_crc = decoupled ? 32'd0 : rp_tbl_crc;
    assign sh_identity = decoupled ? 256'd0 : rp_identity;
    assign sh_reading = !decoupled && rp_reading;
    assign rp_req_valid = !decoupled && sh_req_valid;
    assign rp_req_data = sh_req_data;
    assign rp_rsp_ready = !decoupled && sh_rsp_ready;
    assign rp_reload = !decoupled && sh_reload;
    assign rp_tbl_start = !decoupled && sh_tbl_start;
    assign rp_tbl_base = sh_tbl_base;
    assign rp_tbl_region = sh_tbl_region;

    // Bursts the PS owes the slot's port, and whether their beats are
    // dropped: from a decoupling until none is owed.
    reg [7:0] owed;
    reg       dropping;
    wire      ps_ar = ps_arvalid && ps_arready;
    wire      ps_end = ps_rvalid && ps_rready && ps_rlast;
    always @(posedge clk) begin
        if (rst) begin
            owed <= 8'd0;
            dropping <= 1'b0;
        end else begin
            // At most the PS's read acceptance is owed; the count saturates
            // rather than wraps should a broken slot ask for more.
            if (ps_ar && !ps_end && owed != 8'hFF)
                owed <= owed + 8'd1;
            else if (ps_end && !ps_ar && owed != 8'd0)
                owed <= owed - 8'd1;
            if (decoupled)
                dropping <= 1'b1;
            else if (owed == 8'd0 || (owed == 8'd1 && ps_end && !ps_ar))
                dropping <= 1'b0;
        end
    end
    wire cut = decoupled || dropping;
    assign draining = cut;

    assign ps_araddr = rp_araddr;
    assign ps_arlen = rp_arlen;
    assign ps_arvalid = !cut && rp_arvalid;
    assign rp_arready = !cut && ps_arready;
    assign rp_rdata = ps_rdata;
    assign rp_rresp = ps_rresp;
    assign rp_rlast = ps_rlast;
    assign rp_rvalid = !cut && ps_rvalid;
    assign ps_rready = cut || rp_rready;
endmodule

`default_nettype wire
