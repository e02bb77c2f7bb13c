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
// The engine's master (contract 2.0) passes through it to the slot's HP
// port, 64 bits wide, and the decoupler counts what is outstanding there,
// as Xilinx's DFX AXI Shutdown Manager (PG377) tracks the transactions at
// a boundary and terminates them when it is active, "because the RM might
// not be able to complete them": the read bursts the PS owes (each AR
// taken, until its RLAST), the write beats the slot owes the PS (each AW
// taken, until its W), and the write responses the PS owes (each AW taken,
// until its B). Writes cross as single beats (AWLEN 0, WLAST high: the
// transformer writes a word at a time), and a write's beat goes to the
// PS only after its address did, as an interconnect routes W by its AW:
// so a beat is never owed an address the slot may not give. Decoupled,
// nothing new is asked for (ARVALID and AWVALID low to the PS), nothing
// answered to the slot (RVALID, BVALID low to it, WREADY low); the beats
// of the read bursts still owed are taken from the PS and dropped (RREADY
// high), each write beat owed is given with no byte enabled (WSTRB 0:
// nothing written), and each response owed taken and dropped (BREADY
// high), also after the slot is coupled again, until none is owed: the
// port is never left with a transaction it cannot finish, and a new
// engine never receives a beat or a response it did not ask for (what a
// slot reprogrammed while coupled asked for, say). `draining` says so,
// and the shell waits for it before it reads what the slot holds. A slot
// decoupled with a read or write under way comes up torn: the shell saw
// it.

`default_nettype none

module fabric_decoupler #(
    parameter integer DAW = 40,
    // A step and its answer (rtl/slot/fabric_slot.v).
    parameter integer REQ_W = 142 + DAW,
    parameter integer RSP_W = 43
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
    output wire             draining,   // what the port owes is being dropped, or completed
    output wire             progress,   // a beat or a response reached the slot

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
    input  wire [63:0]      ps_rdata,
    input  wire [1:0]       ps_rresp,
    input  wire             ps_rlast,
    input  wire             ps_rvalid,
    output wire             ps_rready,
    output wire [DAW-1:0]   ps_awaddr,
    output wire             ps_awvalid,
    input  wire             ps_awready,
    output wire [63:0]      ps_wdata,
    output wire [7:0]       ps_wstrb,
    output wire             ps_wvalid,
    input  wire             ps_wready,
    input  wire [1:0]       ps_bresp,
    input  wire             ps_bvalid,
    output wire             ps_bready,

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
    output wire [63:0]      rp_rdata,
    output wire [1:0]       rp_rresp,
    output wire             rp_rlast,
    output wire             rp_rvalid,
    input  wire             rp_rready,
    input  wire [DAW-1:0]   rp_awaddr,
    input  wire             rp_awvalid,
    output wire             rp_awready,
    input  wire [63:0]      rp_wdata,
    input  wire [7:0]       rp_wstrb,
    input  wire             rp_wvalid,
    output wire             rp_wready,
    output wire [1:0]       rp_bresp,
    output wire             rp_bvalid,
    input  wire             rp_bready
);

`ifdef FABRIC_MUTANTS
    // Broken on purpose where the co-simulation is started with
    // +fabric_break_<name> (scripts/rtl-mutants); FABRIC_MUTANTS is defined
    // only for that build, never for a design synthesized.
    reg break_decoupler;
    initial break_decoupler = $test$plusargs("fabric_break_decoupler") != 0;
`endif

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
`ifdef FABRIC_MUTANTS
        // Broken: never decoupled.
        else if (reg_we && reg_waddr == 12'h000 && !break_decoupler)
            decoupled <= reg_wdata[0];
`else
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

    // What is owed at the port, and whether it is being dropped or
    // completed: from a decoupling until nothing is.
    reg [7:0] owed;                      // read bursts the PS owes
    reg [7:0] w_owed;                    // write beats owed the PS
    reg [7:0] b_owed;                    // write responses the PS owes
    reg       dropping;
    wire      ps_ar = ps_arvalid && ps_arready;
    wire      ps_end = ps_rvalid && ps_rready && ps_rlast;
    wire      ps_aw = ps_awvalid && ps_awready;
    wire      ps_w = ps_wvalid && ps_wready;
    wire      ps_b = ps_bvalid && ps_bready;
    // Each count at most the PS's acceptance; it saturates rather than
    // wraps should a broken slot ask for more.
    function [7:0] count(input [7:0] n, input up, input down);
        begin
            if (up && !down && n != 8'hFF)
                count = n + 8'd1;
            else if (down && !up && n != 8'd0)
                count = n - 8'd1;
            else
                count = n;
        end
    endfunction
    wire [7:0] owed_next = count(owed, ps_ar, ps_end);
    wire [7:0] w_owed_next = count(w_owed, ps_aw, ps_w);
    wire [7:0] b_owed_next = count(b_owed, ps_aw, ps_b);
    always @(posedge clk) begin
        if (rst) begin
            owed <= 8'd0;
            w_owed <= 8'd0;
            b_owed <= 8'd0;
            dropping <= 1'b0;
        end else begin
            owed <= owed_next;
            w_owed <= w_owed_next;
            b_owed <= b_owed_next;
            if (decoupled)
                dropping <= 1'b1;
            else if ({owed_next, w_owed_next, b_owed_next} == 24'd0)
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

    assign ps_awaddr = rp_awaddr;
    assign ps_awvalid = !cut && rp_awvalid;
    assign rp_awready = !cut && ps_awready;
    // A beat only behind its address; cut off, the beats owed go with
    // nothing enabled.
    wire   w_pass = !cut && w_owed != 8'd0;
    assign ps_wvalid = cut ? w_owed != 8'd0 : w_pass && rp_wvalid;
    assign ps_wdata = cut ? 64'd0 : rp_wdata;
    assign ps_wstrb = cut ? 8'd0 : rp_wstrb;
    assign rp_wready = w_pass && ps_wready;
    assign rp_bresp = ps_bresp;
    assign rp_bvalid = !cut && ps_bvalid;
    assign ps_bready = cut || rp_bready;
    assign progress = (rp_rvalid && rp_rready) || (rp_bvalid && rp_bready);
endmodule

`default_nettype wire
