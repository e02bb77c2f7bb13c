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
// The boundary's two channels, the same for every engine a slot can hold:
//   a step,   REQ_W = 142 + DAW bits, most significant first:
//             lane [8], first [1], prompt address [DAW], prompt length [16],
//             a [32], b [32], draw [32], greedy [1], inv_t [20]
//             (a transformer feeds the whole prompt at a sequence's first
//             step; the trigram engine needs only the last two tokens, a
//             and b, which the shell read);
//   an answer, RSP_W = 43 bits: lane [8], token [32], fault [3]
//             (0 a token, 1 no table, 2 a read failed, 3 the context is
//             full, 4 a prompt token outside the vocabulary).
// The trigram engine keeps nothing between steps and takes one at a time,
// so its answer carries the lane of the step it took.
//
// The port is the HP port's 64 bits, with a write channel (single beats)
// that the transformer needs and the trigram engine leaves idle; the
// engine reads its 32-bit words through fabric_rd_up.
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
    parameter integer REQ_W = 142 + DAW,
    parameter integer RSP_W = 43,
    parameter integer AR_W = DAW + 8
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

    // A table commit, and what it came to.
    input  wire             tbl_start,
    input  wire [DAW-1:0]   tbl_base,
    input  wire [31:0]      tbl_region,
    output reg              tbl_done,
    output reg  [1:0]       tbl_result,
    output reg  [31:0]      tbl_crc,
    output reg  [255:0]     identity,
    output reg              reading,

    // The engine's master, to its HP port: INCR bursts of 64-bit beats,
    // and single-beat writes.
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
    wire [31:0]      e_rsp_token;
    wire [1:0]       e_rsp_fault;
    reg  [7:0]       lane;               // the step the engine took
    wire             unused_req = ^e_req[REQ_W-9:117];
    always @(posedge clk)
        if (e_req_valid && e_req_ready)
            lane <= e_req[REQ_W-1 -: 8];

    fabric_skid #(.W(REQ_W)) req_in (
        .clk(clk), .rst(rst),
        .s_valid(req_valid), .s_ready(req_ready), .s_data(req_data),
        .m_valid(e_req_valid), .m_ready(e_req_ready), .m_data(e_req)
    );
    fabric_skid #(.W(RSP_W)) rsp_out (
        .clk(clk), .rst(rst),
        .s_valid(e_rsp_valid), .s_ready(e_rsp_ready), .s_data({lane, e_rsp_token, 1'b0, e_rsp_fault}),
        .m_valid(rsp_valid), .m_ready(rsp_ready), .m_data(rsp_data)
    );

    // The read master's channels: AR out and R in through slices, the
    // engine's words through the upsizer.
    wire [DAW-1:0] e_araddr, u_araddr;
    wire [7:0]     e_arlen, u_arlen;
    wire [2:0]     unused_arsize;
    wire [1:0]     unused_arburst;
    wire           e_arvalid, e_arready, e_rvalid, e_rready, e_rlast;
    wire           u_arvalid, u_arready, u_rvalid, u_rready, u_rlast;
    wire [31:0]    e_rdata;
    wire [63:0]    u_rdata;
    wire [1:0]     e_rresp, u_rresp;

    fabric_rd_up #(.AW(DAW)) up (
        .clk(clk), .rst(rst),
        .s_araddr(e_araddr), .s_arlen(e_arlen), .s_arvalid(e_arvalid), .s_arready(e_arready),
        .s_rdata(e_rdata), .s_rresp(e_rresp), .s_rlast(e_rlast), .s_rvalid(e_rvalid),
        .s_rready(e_rready),
        .m_araddr(u_araddr), .m_arlen(u_arlen), .m_arvalid(u_arvalid), .m_arready(u_arready),
        .m_rdata(u_rdata), .m_rresp(u_rresp), .m_rlast(u_rlast), .m_rvalid(u_rvalid),
        .m_rready(u_rready)
    );
    fabric_skid #(.W(AR_W)) ar_out (
        .clk(clk), .rst(rst),
        .s_valid(u_arvalid), .s_ready(u_arready), .s_data({u_araddr, u_arlen}),
        .m_valid(m_arvalid), .m_ready(m_arready), .m_data({m_araddr, m_arlen})
    );
    fabric_skid #(.W(67)) r_in (
        .clk(clk), .rst(rst),
        .s_valid(m_rvalid), .s_ready(m_rready), .s_data({m_rdata, m_rresp, m_rlast}),
        .m_valid(u_rvalid), .m_ready(u_rready), .m_data({u_rdata, u_rresp, u_rlast})
    );

    // This engine writes nothing.
    assign m_awaddr = {DAW{1'b0}};
    assign m_awvalid = 1'b0;
    assign m_wdata = 64'd0;
    assign m_wstrb = 8'd0;
    assign m_wvalid = 1'b0;
    assign m_bready = 1'b1;
    wire unused_write = ^{m_awready, m_wready, m_bresp, m_bvalid};

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
