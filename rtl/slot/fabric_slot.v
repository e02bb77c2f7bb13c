// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_slot: what a PR slot holds: an engine (contract 2.0), which reads
// its model's table from DDR through its own AXI4 read master. Every
// engine is one reconfigurable module: a partial bitstream of the slot
// carries the engine's logic and no model; the host commits a model's
// table to it (docs/fabric-contract.md section 7). The slot comes out of
// reset after every load (RESET_AFTER_RECONFIG, and the shell's reload)
// holding no table.
//
// Its side of the partition boundary is registered: a register slice on
// the step's channel in and the answer's out, on the read master's AR
// out and R in; the commit's and the table's signals in flip-flops both
// ways; and `engine`, a constant that a greybox (no module) leaves at 0.

`default_nettype none

module fabric_slot #(
    parameter [31:0]  ENGINE = {16'd2, 16'd1},   // SLOT_ENGINE: version 2, kind 1
    parameter integer DAW = 40,
    parameter integer MAX_BURST = 16,
    // Derived from the parameters above: leave them be.
    parameter integer REQ_W = 117,
    parameter integer RSP_W = 34,
    parameter integer AR_W = DAW + 8
) (
    input  wire             clk,
    input  wire             rst,

    input  wire             req_valid,
    output wire             req_ready,
    input  wire [REQ_W-1:0] req_data,    // a, b, draw, greedy, inv_t
    output wire             rsp_valid,
    input  wire             rsp_ready,
    output wire [RSP_W-1:0] rsp_data,    // token, fault code
    output wire [31:0]      engine,

    // A table commit, and what it came to.
    input  wire             tbl_start,
    input  wire [DAW-1:0]   tbl_base,
    input  wire [31:0]      tbl_region,
    output reg              tbl_done,
    output reg  [1:0]       tbl_result,
    output reg  [31:0]      tbl_crc,
    output reg  [255:0]     identity,
    output reg              reading,

    // The engine's read master, to its HP port (INCR bursts of 32-bit
    // beats).
    output wire [DAW-1:0]   m_araddr,
    output wire [7:0]       m_arlen,
    output wire             m_arvalid,
    input  wire             m_arready,
    input  wire [31:0]      m_rdata,
    input  wire [1:0]       m_rresp,
    input  wire             m_rlast,
    input  wire             m_rvalid,
    output wire             m_rready
);
    assign engine = ENGINE;

    // ---- the boundary's flip-flops -----------------------------------------
    reg           start_q;
    reg [DAW-1:0] base_q;
    reg [31:0]    region_q;
    wire          e_done, e_reading;
    wire [1:0]    e_result;
    wire [31:0]   e_crc;
    wire [255:0]  e_identity;
    always @(posedge clk) begin
        start_q <= !rst && tbl_start;
        base_q <= tbl_base;
        region_q <= tbl_region;
        tbl_done <= !rst && e_done;
        tbl_result <= e_result;
        tbl_crc <= e_crc;
        identity <= e_identity;
        reading <= !rst && e_reading;
    end

    wire             e_req_valid, e_req_ready, e_rsp_valid, e_rsp_ready;
    wire [REQ_W-1:0] e_req;
    wire [31:0]      e_rsp_token;
    wire [1:0]       e_rsp_fault;

    fabric_skid #(.W(REQ_W)) req_in (
        .clk(clk), .rst(rst),
        .s_valid(req_valid), .s_ready(req_ready), .s_data(req_data),
        .m_valid(e_req_valid), .m_ready(e_req_ready), .m_data(e_req)
    );
    fabric_skid #(.W(RSP_W)) rsp_out (
        .clk(clk), .rst(rst),
        .s_valid(e_rsp_valid), .s_ready(e_rsp_ready), .s_data({e_rsp_token, e_rsp_fault}),
        .m_valid(rsp_valid), .m_ready(rsp_ready), .m_data(rsp_data)
    );

    // The read master's channels: AR out and R in through slices.
    wire [DAW-1:0] e_araddr;
    wire [7:0]     e_arlen;
    wire [2:0]     unused_arsize;
    wire [1:0]     unused_arburst;
    wire           e_arvalid, e_arready, e_rvalid, e_rready, e_rlast;
    wire [31:0]    e_rdata;
    wire [1:0]     e_rresp;

    fabric_skid #(.W(AR_W)) ar_out (
        .clk(clk), .rst(rst),
        .s_valid(e_arvalid), .s_ready(e_arready), .s_data({e_araddr, e_arlen}),
        .m_valid(m_arvalid), .m_ready(m_arready), .m_data({m_araddr, m_arlen})
    );
    fabric_skid #(.W(35)) r_in (
        .clk(clk), .rst(rst),
        .s_valid(m_rvalid), .s_ready(m_rready), .s_data({m_rdata, m_rresp, m_rlast}),
        .m_valid(e_rvalid), .m_ready(e_rready), .m_data({e_rdata, e_rresp, e_rlast})
    );

    fabric_engine #(.DAW(DAW), .MAX_BURST(MAX_BURST)) eng (
        .clk(clk), .rst(rst),
        .tbl_start(start_q), .tbl_base(base_q), .tbl_region(region_q),
        .tbl_done(e_done), .tbl_result(e_result), .tbl_crc(e_crc), .identity(e_identity),
        .reading(e_reading),
        .req_valid(e_req_valid), .req_ready(e_req_ready),
        .req_a(e_req[116:85]), .req_b(e_req[84:53]), .req_draw(e_req[52:21]),
        .req_greedy(e_req[20]), .req_inv_t(e_req[19:0]),
        .rsp_valid(e_rsp_valid), .rsp_ready(e_rsp_ready),
        .rsp_token(e_rsp_token), .rsp_fault(e_rsp_fault),
        .m_araddr(e_araddr), .m_arlen(e_arlen), .m_arsize(unused_arsize),
        .m_arburst(unused_arburst), .m_arvalid(e_arvalid), .m_arready(e_arready),
        .m_rdata(e_rdata), .m_rresp(e_rresp), .m_rlast(e_rlast), .m_rvalid(e_rvalid),
        .m_rready(e_rready)
    );
endmodule

`default_nettype wire
