// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_cosim: the fabric as the co-simulation drives it: the shell, a
// decoupler and a slot per PR slot, with the PS's side (the register
// windows' AXI4-Lite, the HP port's AXI4, the interrupt) left as ports for
// rtl/sim/cosim.cpp. Each slot's table is large enough for any model of the
// catalog; a partial load writes it through Verilator's public access, as
// the configuration port would.
//
// step_gate paces the slots' engines to a decode time for the daemon's
// tests (fabric-sim --rtl); open, it changes nothing.
//
// pr_active[s] stands for the slot's logic being reprogrammed: while it is
// set, the slot's outputs are whatever its half-configured logic drives
// (here, a free-running LFSR's bits). Only the decoupler keeps them from the
// shell.

`default_nettype none

module fabric_cosim #(
    parameter integer SLOTS = 2,
    parameter integer LANES = 4,
    parameter integer CPS = 8,
    parameter integer TABLE_WORDS = 524288,
    parameter integer CLK_MHZ = 200,
    parameter [31:0]  DECODE_NS = 32'd1000,
    parameter [31:0]  PREFILL_NS = 32'd20
) (
    input  wire               clk,
    input  wire               rst,

    // The shell's window, then each decoupler's: port p at index p.
    input  wire [SLOTS:0]     s_awvalid,
    output wire [SLOTS:0]     s_awready,
    input  wire [11:0]        s_awaddr,
    input  wire [SLOTS:0]     s_wvalid,
    output wire [SLOTS:0]     s_wready,
    input  wire [31:0]        s_wdata,
    input  wire [3:0]         s_wstrb,
    output wire [SLOTS:0]     s_bvalid,
    input  wire [SLOTS:0]     s_bready,
    input  wire [SLOTS:0]     s_arvalid,
    output wire [SLOTS:0]     s_arready,
    input  wire [11:0]        s_araddr,
    output wire [SLOTS:0]     s_rvalid,
    input  wire [SLOTS:0]     s_rready,
    output wire [32*SLOTS+31:0] s_rdata,

    output wire [39:0]        m_araddr,
    output wire [7:0]         m_arlen,
    output wire               m_arvalid,
    input  wire               m_arready,
    input  wire [31:0]        m_rdata,
    input  wire [1:0]         m_rresp,
    input  wire               m_rlast,
    input  wire               m_rvalid,
    output wire [39:0]        m_awaddr,
    output wire [7:0]         m_awlen,
    output wire               m_awvalid,
    input  wire               m_awready,
    output wire [31:0]        m_wdata,
    output wire               m_wlast,
    output wire               m_wvalid,
    input  wire               m_wready,
    input  wire [1:0]         m_bresp,
    input  wire               m_bvalid,

    output wire               irq,
    input  wire [SLOTS-1:0]   pr_active,
    output wire [SLOTS-1:0]   decoupled,
    // The co-simulation's pacing: a slot takes a step only while its gate
    // is open; step_taken says a step was handed over this cycle.
    input  wire [SLOTS-1:0]   step_gate,
    output wire [SLOTS-1:0]   step_taken
);
    wire [SLOTS-1:0]     req_valid, req_ready, rsp_valid, rsp_ready, rsp_fault, reload, table_ok;
    wire [SLOTS-1:0]     table_blank;
    wire [31:0]          step_a, step_b, step_draw;
    wire                 step_greedy;
    wire [19:0]          step_inv_t;
    wire [SLOTS*32-1:0]  rsp_token;
    wire [SLOTS*256-1:0] identity;
    /* verilator lint_off UNUSEDSIGNAL */
    wire [1:0]           unused_resp [0:SLOTS];
    wire [2:0]           unused_size [0:1];
    wire [1:0]           unused_burst [0:1];
    wire [3:0]           unused_wstrb;
    wire                 unused_ready [0:1];
    /* verilator lint_on UNUSEDSIGNAL */
    wire [1:0]           unused_bresp [0:SLOTS];

    fabric_shell #(
        .SLOTS(SLOTS), .LANES(LANES), .CPS(CPS), .CLK_MHZ(CLK_MHZ),
        .DECODE_NS(DECODE_NS), .PREFILL_NS(PREFILL_NS)
    ) shell (
        .clk(clk), .rst(rst),
        .s_awvalid(s_awvalid[0]), .s_awready(s_awready[0]), .s_awaddr(s_awaddr),
        .s_wvalid(s_wvalid[0]), .s_wready(s_wready[0]), .s_wdata(s_wdata), .s_wstrb(s_wstrb),
        .s_bvalid(s_bvalid[0]), .s_bready(s_bready[0]), .s_bresp(unused_bresp[0]),
        .s_arvalid(s_arvalid[0]), .s_arready(s_arready[0]), .s_araddr(s_araddr),
        .s_rvalid(s_rvalid[0]), .s_rready(s_rready[0]), .s_rdata(s_rdata[31:0]),
        .s_rresp(unused_resp[0]),
        .m_araddr(m_araddr), .m_arlen(m_arlen), .m_arsize(unused_size[0]),
        .m_arburst(unused_burst[0]), .m_arvalid(m_arvalid), .m_arready(m_arready),
        .m_rdata(m_rdata), .m_rresp(m_rresp), .m_rlast(m_rlast), .m_rvalid(m_rvalid),
        .m_rready(unused_ready[0]),
        .m_awaddr(m_awaddr), .m_awlen(m_awlen), .m_awsize(unused_size[1]),
        .m_awburst(unused_burst[1]), .m_awvalid(m_awvalid), .m_awready(m_awready),
        .m_wdata(m_wdata), .m_wstrb(unused_wstrb), .m_wlast(m_wlast), .m_wvalid(m_wvalid),
        .m_wready(m_wready), .m_bresp(m_bresp), .m_bvalid(m_bvalid), .m_bready(unused_ready[1]),
        .irq(irq),
        .slot_req_valid(req_valid), .slot_req_ready(req_ready),
        .step_a(step_a), .step_b(step_b), .step_draw(step_draw),
        .step_greedy(step_greedy), .step_inv_t(step_inv_t),
        .slot_rsp_valid(rsp_valid), .slot_rsp_ready(rsp_ready), .slot_rsp_token(rsp_token),
        .slot_rsp_fault(rsp_fault), .slot_reload(reload), .slot_table_ok(table_ok),
        .slot_table_blank(table_blank),
        .slot_identity(identity), .slot_decoupled(decoupled)
    );

    // What a half-configured slot drives.
    reg [31:0] lfsr;
    always @(posedge clk)
        lfsr <= rst ? 32'hACE1_2468 : {lfsr[30:0], lfsr[31] ^ lfsr[21] ^ lfsr[1] ^ lfsr[0]};

    genvar g;
    generate
        for (g = 0; g < SLOTS; g = g + 1) begin : slot
            wire         rp_req_valid, rp_req_ready, rp_rsp_ready, rp_rsp_valid, rp_rsp_fault;
            wire         rp_reload, rp_table_ok, rp_table_blank;
            wire [31:0]  rp_rsp_token;
            wire [255:0] rp_identity;
            wire         m_req_ready, m_rsp_valid, m_rsp_fault, m_table_ok, m_table_blank;
            wire [31:0]  m_rsp_token;
            wire [255:0] m_identity;

            fabric_decoupler dcp (
                .clk(clk), .rst(rst),
                .s_awvalid(s_awvalid[g + 1]), .s_awready(s_awready[g + 1]), .s_awaddr(s_awaddr),
                .s_wvalid(s_wvalid[g + 1]), .s_wready(s_wready[g + 1]), .s_wdata(s_wdata),
                .s_wstrb(s_wstrb), .s_bvalid(s_bvalid[g + 1]), .s_bready(s_bready[g + 1]),
                .s_bresp(unused_bresp[g + 1]), .s_arvalid(s_arvalid[g + 1]),
                .s_arready(s_arready[g + 1]), .s_araddr(s_araddr), .s_rvalid(s_rvalid[g + 1]),
                .s_rready(s_rready[g + 1]), .s_rdata(s_rdata[32 * (g + 1) +: 32]),
                .s_rresp(unused_resp[g + 1]),
                .decoupled(decoupled[g]),
                .sh_req_valid(req_valid[g]), .sh_req_ready(req_ready[g]),
                .sh_rsp_ready(rsp_ready[g]), .sh_rsp_valid(rsp_valid[g]),
                .sh_rsp_token(rsp_token[32 * g +: 32]), .sh_rsp_fault(rsp_fault[g]),
                .sh_reload(reload[g]), .sh_table_ok(table_ok[g]),
                .sh_table_blank(table_blank[g]),
                .sh_identity(identity[256 * g +: 256]),
                .rp_req_valid(rp_req_valid), .rp_req_ready(rp_req_ready),
                .rp_rsp_ready(rp_rsp_ready), .rp_rsp_valid(rp_rsp_valid),
                .rp_rsp_token(rp_rsp_token), .rp_rsp_fault(rp_rsp_fault),
                .rp_reload(rp_reload), .rp_table_ok(rp_table_ok),
                .rp_table_blank(rp_table_blank), .rp_identity(rp_identity)
            );

            fabric_slot #(.TABLE_WORDS(TABLE_WORDS)) rm (
                .clk(clk), .rst(rst || rp_reload),
                .req_valid(rp_req_valid && step_gate[g]), .req_ready(m_req_ready),
                .req_a(step_a), .req_b(step_b), .req_draw(step_draw),
                .req_greedy(step_greedy), .req_inv_t(step_inv_t),
                .rsp_valid(m_rsp_valid), .rsp_ready(rp_rsp_ready),
                .rsp_token(m_rsp_token), .rsp_fault(m_rsp_fault),
                .reload(1'b0), .table_ok(m_table_ok), .table_blank(m_table_blank),
                .identity(m_identity)
            );

            // A closed gate holds a request back; with none pending the slot's
            // READY shows through (the shell checks it as the slot settles).
            assign rp_req_ready = pr_active[g] ? lfsr[g]
                                : (m_req_ready && (step_gate[g] || !rp_req_valid));
            assign step_taken[g] = !pr_active[g] && rp_req_valid && step_gate[g] && m_req_ready;
            assign rp_rsp_valid = pr_active[g] ? lfsr[g + 3] : m_rsp_valid;
            assign rp_rsp_token = pr_active[g] ? lfsr : m_rsp_token;
            assign rp_rsp_fault = pr_active[g] ? lfsr[g + 7] : m_rsp_fault;
            assign rp_table_ok = pr_active[g] ? lfsr[g + 11] : m_table_ok;
            assign rp_table_blank = pr_active[g] ? lfsr[g + 13] : m_table_blank;
            assign rp_identity = pr_active[g] ? {8{lfsr}} : m_identity;
        end
    endgenerate
endmodule

`default_nettype wire
