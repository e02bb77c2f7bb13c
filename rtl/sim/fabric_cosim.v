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
// tests (fabric-sim --rtl); open, it changes nothing. A step held at a
// closed gate is not the slot's time: the shell's watchdog does not count
// it (slot_hold).
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
    // The slot holds no module (a greybox): its outputs are tied to 0, as
    // Vivado ties a reconfigurable partition left empty (UG909).
    input  wire [SLOTS-1:0]   greybox,
    output wire [SLOTS-1:0]   decoupled,
    // The co-simulation's pacing: a slot takes a step only while its gate
    // is open; step_taken says a step was handed over this cycle.
    input  wire [SLOTS-1:0]   step_gate,
    output wire [SLOTS-1:0]   step_taken
);
    localparam integer REQ_W = 117;
    localparam integer RSP_W = 33;

    wire [SLOTS-1:0]       req_valid, req_ready, rsp_valid, rsp_ready, reload, present;
    wire [SLOTS-1:0]       table_done, table_ok, hold;
    wire [SLOTS*REQ_W-1:0] req_data;
    wire [SLOTS*RSP_W-1:0] rsp_data;
    wire [SLOTS*256-1:0]   identity;
    wire [1:0]             unused_resp [0:SLOTS];
    wire [2:0]             unused_size [0:1];
    wire [1:0]             unused_burst [0:1];
    wire [3:0]             unused_wstrb;
    wire                   unused_ready [0:1];
    wire [1:0]             unused_bresp [0:SLOTS];

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
        .slot_req_valid(req_valid), .slot_req_ready(req_ready), .slot_req_data(req_data),
        .slot_rsp_valid(rsp_valid), .slot_rsp_ready(rsp_ready), .slot_rsp_data(rsp_data),
        .slot_reload(reload), .slot_present(present), .slot_table_done(table_done),
        .slot_table_ok(table_ok), .slot_identity(identity), .slot_decoupled(decoupled),
        .slot_hold(hold)
    );

    // What a half-configured slot drives.
    reg [31:0] lfsr;
    always @(posedge clk)
        lfsr <= rst ? 32'hACE1_2468 : {lfsr[30:0], lfsr[31] ^ lfsr[21] ^ lfsr[1] ^ lfsr[0]};

    genvar g;
    generate
        for (g = 0; g < SLOTS; g = g + 1) begin : slot
            wire             rp_req_valid, rp_req_ready, rp_rsp_ready, rp_rsp_valid;
            wire             rp_reload, rp_present, rp_table_done, rp_table_ok;
            wire [REQ_W-1:0] rp_req_data;
            wire [RSP_W-1:0] rp_rsp_data;
            wire [255:0]     rp_identity;
            wire             m_req_ready, m_rsp_valid, m_present, m_table_done, m_table_ok;
            wire [RSP_W-1:0] m_rsp_data;
            wire [255:0]     m_identity;
            // A module comes up from its initial state after it is programmed
            // (RESET_AFTER_RECONFIG), and after the shell's reload.
            wire             m_rst = rst || rp_reload || greybox[g] || pr_active[g];

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
                .sh_req_data(req_data[REQ_W * g +: REQ_W]),
                .sh_rsp_valid(rsp_valid[g]), .sh_rsp_ready(rsp_ready[g]),
                .sh_rsp_data(rsp_data[RSP_W * g +: RSP_W]),
                .sh_reload(reload[g]), .sh_present(present[g]), .sh_table_done(table_done[g]),
                .sh_table_ok(table_ok[g]), .sh_identity(identity[256 * g +: 256]),
                .rp_req_valid(rp_req_valid), .rp_req_ready(rp_req_ready),
                .rp_req_data(rp_req_data),
                .rp_rsp_valid(rp_rsp_valid), .rp_rsp_ready(rp_rsp_ready),
                .rp_rsp_data(rp_rsp_data),
                .rp_reload(rp_reload), .rp_present(rp_present), .rp_table_done(rp_table_done),
                .rp_table_ok(rp_table_ok), .rp_identity(rp_identity)
            );

            fabric_slot #(.TABLE_WORDS(TABLE_WORDS)) rm (
                .clk(clk), .rst(m_rst),
                .req_valid(rp_req_valid && step_gate[g] && !greybox[g]), .req_ready(m_req_ready),
                .req_data(rp_req_data),
                .rsp_valid(m_rsp_valid), .rsp_ready(rp_rsp_ready), .rsp_data(m_rsp_data),
                .present(m_present), .table_done(m_table_done), .table_ok(m_table_ok),
                .identity(m_identity)
            );

            // The gate: closed, the slot sees no request and READY stays low.
            assign hold[g] = rp_req_valid && !step_gate[g];
            assign step_taken[g] = rp_req_valid && rp_req_ready;
            // Half-programmed logic drives garbage; a greybox drives 0.
            assign rp_req_ready = pr_active[g] ? lfsr[g]
                                : (!greybox[g] && m_req_ready && step_gate[g]);
            assign rp_rsp_valid = pr_active[g] ? lfsr[g + 3] : (!greybox[g] && m_rsp_valid);
            assign rp_rsp_data = pr_active[g] ? {lfsr[0], lfsr} : (greybox[g] ? {RSP_W{1'b0}} : m_rsp_data);
            assign rp_present = pr_active[g] ? lfsr[g + 7] : (!greybox[g] && m_present);
            assign rp_table_done = pr_active[g] ? lfsr[g + 9] : (!greybox[g] && m_table_done);
            assign rp_table_ok = pr_active[g] ? lfsr[g + 11] : (!greybox[g] && m_table_ok);
            assign rp_identity = pr_active[g] ? {8{lfsr}} : (greybox[g] ? 256'd0 : m_identity);
        end
    endgenerate
endmodule

`default_nettype wire
