// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_slot_lm: a PR slot holding the transformer engine (contract
// section 10: engine kind 2, version 1), the reconfigurable module beside
// fabric_slot's trigram engine, with the same boundary (fabric_slot.v
// gives its channels): a partial bitstream of the slot carries either,
// and the host commits the weights to it as it commits a table.
//
// The engine keeps each lane's keys and values in DDR after its weights,
// LANES contexts of them: the shell's lanes (LANES, the most contexts a
// slot decodes at once), whose numbers fabric_sched keeps below LANES, so
// a region sized for the shell's lanes holds them (the daemon reckons the
// same). Its steps are batched: every lane's step waiting is served by one
// pass over the weights.
//
// Its side of the partition boundary is registered, as fabric_slot's: a
// register slice on every channel (the step in and the answer out; AR and
// R; AW, W and B), the commit's and the table's signals in flip-flops both
// ways, and `engine`, a constant.

`default_nettype none

module fabric_slot_lm #(
    parameter [31:0]  ENGINE = {16'd1, 16'd2},   // SLOT_ENGINE: version 1, kind 2
    parameter integer DAW = 40,
    parameter integer LANES = 4,
    parameter integer MAX_BURST = 16,
    // Derived from the parameters above: leave them be.
    parameter integer REQ_W = 142 + DAW,
    parameter integer RSP_W = 43,
    parameter integer AR_W = DAW + 8,
    parameter integer LW = (LANES > 1) ? $clog2(LANES) : 1
) (
    input  wire             clk,
    input  wire             rst,

    input  wire             req_valid,
    output wire             req_ready,
    input  wire [REQ_W-1:0] req_data,    // lane, first, prompt, length, a, b, draw, greedy, inv_t
    output wire             rsp_valid,
    input  wire             rsp_ready,
    output wire [RSP_W-1:0] rsp_data,    // lane, token, fault code
    output wire [31:0]      engine,

    input  wire             tbl_start,
    input  wire [DAW-1:0]   tbl_base,
    input  wire [31:0]      tbl_region,
    output reg              tbl_done,
    output reg  [1:0]       tbl_result,
    output reg  [31:0]      tbl_crc,
    output reg  [255:0]     identity,
    output reg              reading,

    output wire [DAW-1:0]   m_araddr,
    output wire [7:0]       m_arlen,
    output wire             m_arvalid,
    input  wire             m_arready,
    input  wire [63:0]      m_rdata,
    input  wire [1:0]       m_rresp,
    input  wire             m_rlast,
    input  wire             m_rvalid,
    output wire             m_rready,
    output wire [DAW-1:0]   m_awaddr,
    output wire             m_awvalid,
    input  wire             m_awready,
    output wire [63:0]      m_wdata,
    output wire [7:0]       m_wstrb,
    output wire             m_wvalid,
    input  wire             m_wready,
    input  wire [1:0]       m_bresp,
    input  wire             m_bvalid,
    output wire             m_bready
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
    wire [LW-1:0]    e_rsp_lane;
    wire [31:0]      e_rsp_token;
    wire [2:0]       e_rsp_fault;
    // The trigram engine's two tokens, and lane bits above the engine's.
    wire             unused_req = ^{e_req[REQ_W-1 -: 8 - LW], e_req[116:53]};

    fabric_skid #(.W(REQ_W)) req_in (
        .clk(clk), .rst(rst),
        .s_valid(req_valid), .s_ready(req_ready), .s_data(req_data),
        .m_valid(e_req_valid), .m_ready(e_req_ready), .m_data(e_req)
    );
    fabric_skid #(.W(RSP_W)) rsp_out (
        .clk(clk), .rst(rst),
        .s_valid(e_rsp_valid), .s_ready(e_rsp_ready),
        .s_data({{(8 - LW){1'b0}}, e_rsp_lane, e_rsp_token, e_rsp_fault}),
        .m_valid(rsp_valid), .m_ready(rsp_ready), .m_data(rsp_data)
    );

    // ---- the port's channels, through slices ----------------------------------
    wire [DAW-1:0] e_araddr, e_awaddr;
    wire [7:0]     e_arlen, unused_awlen;
    wire [2:0]     unused_arsize, unused_awsize;
    wire [1:0]     unused_arburst, unused_awburst;
    wire           e_arvalid, e_arready, e_rvalid, e_rready, e_rlast;
    wire           e_awvalid, e_awready, e_wvalid, e_wready, e_bvalid, e_bready;
    wire           unused_wlast;
    wire [63:0]    e_rdata, e_wdata;
    wire [7:0]     e_wstrb;
    wire [1:0]     e_rresp, e_bresp;

    fabric_skid #(.W(AR_W)) ar_out (
        .clk(clk), .rst(rst),
        .s_valid(e_arvalid), .s_ready(e_arready), .s_data({e_araddr, e_arlen}),
        .m_valid(m_arvalid), .m_ready(m_arready), .m_data({m_araddr, m_arlen})
    );
    fabric_skid #(.W(67)) r_in (
        .clk(clk), .rst(rst),
        .s_valid(m_rvalid), .s_ready(m_rready), .s_data({m_rdata, m_rresp, m_rlast}),
        .m_valid(e_rvalid), .m_ready(e_rready), .m_data({e_rdata, e_rresp, e_rlast})
    );
    fabric_skid #(.W(DAW)) aw_out (
        .clk(clk), .rst(rst),
        .s_valid(e_awvalid), .s_ready(e_awready), .s_data(e_awaddr),
        .m_valid(m_awvalid), .m_ready(m_awready), .m_data(m_awaddr)
    );
    fabric_skid #(.W(72)) w_out (
        .clk(clk), .rst(rst),
        .s_valid(e_wvalid), .s_ready(e_wready), .s_data({e_wdata, e_wstrb}),
        .m_valid(m_wvalid), .m_ready(m_wready), .m_data({m_wdata, m_wstrb})
    );
    fabric_skid #(.W(2)) b_in (
        .clk(clk), .rst(rst),
        .s_valid(m_bvalid), .s_ready(m_bready), .s_data(m_bresp),
        .m_valid(e_bvalid), .m_ready(e_bready), .m_data(e_bresp)
    );

    fabric_lm #(.DAW(DAW), .DW(64), .MAX_BURST(MAX_BURST), .LANES(LANES)) eng (
        .clk(clk), .rst(rst),
        .tbl_start(start_q), .tbl_base(base_q), .tbl_region(region_q),
        .tbl_done(e_done), .tbl_result(e_result), .tbl_crc(e_crc), .identity(e_identity),
        .reading(e_reading),
        .req_valid(e_req_valid), .req_ready(e_req_ready),
        .req_lane(e_req[REQ_W-8 +: LW]), .req_first(e_req[REQ_W-9]),
        .req_prompt(e_req[REQ_W-10 -: DAW]), .req_len(e_req[132:117]),
        .req_draw(e_req[52:21]), .req_greedy(e_req[20]), .req_inv_t(e_req[19:0]),
        .rsp_valid(e_rsp_valid), .rsp_ready(e_rsp_ready), .rsp_lane(e_rsp_lane),
        .rsp_token(e_rsp_token), .rsp_fault(e_rsp_fault),
        .m_araddr(e_araddr), .m_arlen(e_arlen), .m_arsize(unused_arsize),
        .m_arburst(unused_arburst), .m_arvalid(e_arvalid), .m_arready(e_arready),
        .m_rdata(e_rdata), .m_rresp(e_rresp), .m_rlast(e_rlast), .m_rvalid(e_rvalid),
        .m_rready(e_rready),
        .m_awaddr(e_awaddr), .m_awlen(unused_awlen), .m_awsize(unused_awsize),
        .m_awburst(unused_awburst), .m_awvalid(e_awvalid), .m_awready(e_awready),
        .m_wdata(e_wdata), .m_wstrb(e_wstrb), .m_wlast(unused_wlast), .m_wvalid(e_wvalid),
        .m_wready(e_wready), .m_bresp(e_bresp), .m_bvalid(e_bvalid), .m_bready(e_bready)
    );
endmodule

`default_nettype wire
