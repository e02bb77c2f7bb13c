// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_cosim: the fabric as the co-simulation drives it: the shell, a
// decoupler and a slot per PR slot, with the PS's side (the register
// windows' AXI4-Lite, the HP port's AXI4, the interrupt) left as ports for
// rtl/sim/cosim.cpp, and each slot's engine's HP port (its AXI4 read
// channels) too: the tables the engines read lie in the host's memory, as
// they lie in DDR on a board.
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

    // Each slot's engine's HP port: AR and R, AW, W and B (64 bits).
    output wire [40*SLOTS-1:0] e_araddr,
    output wire [8*SLOTS-1:0]  e_arlen,
    output wire [SLOTS-1:0]    e_arvalid,
    input  wire [SLOTS-1:0]    e_arready,
    input  wire [64*SLOTS-1:0] e_rdata,
    input  wire [2*SLOTS-1:0]  e_rresp,
    input  wire [SLOTS-1:0]    e_rlast,
    input  wire [SLOTS-1:0]    e_rvalid,
    output wire [SLOTS-1:0]    e_rready,
    output wire [40*SLOTS-1:0] e_awaddr,
    output wire [SLOTS-1:0]    e_awvalid,
    input  wire [SLOTS-1:0]    e_awready,
    output wire [64*SLOTS-1:0] e_wdata,
    output wire [8*SLOTS-1:0]  e_wstrb,
    output wire [SLOTS-1:0]    e_wvalid,
    input  wire [SLOTS-1:0]    e_wready,
    input  wire [2*SLOTS-1:0]  e_bresp,
    input  wire [SLOTS-1:0]    e_bvalid,
    output wire [SLOTS-1:0]    e_bready,

    output wire               irq,
    input  wire [SLOTS-1:0]   pr_active,
    // The slot holds no module (a greybox): its outputs are tied to 0, as
    // Vivado ties a reconfigurable partition left empty (UG909).
    input  wire [SLOTS-1:0]   greybox,
    // Which module the slot holds: the transformer (fabric_slot_lm), else
    // the trigram engine (fabric_slot). Both are built into each slot, as
    // a partial bitstream of either could be loaded into it; the other is
    // held in reset with its clock stopped, its outputs unused.
    input  wire [SLOTS-1:0]   lm_module,
    output wire [SLOTS-1:0]   decoupled,
    // The co-simulation's pacing: a slot takes a step only while its gate
    // is open; step_taken says a step was handed over this cycle.
    input  wire [SLOTS-1:0]   step_gate,
    output wire [SLOTS-1:0]   step_taken
);
    localparam integer DAW = 40;
    localparam integer REQ_W = 142 + DAW;
    localparam integer RSP_W = 43;

    wire [SLOTS-1:0]       req_valid, req_ready, rsp_valid, rsp_ready, reload, hold;
    wire [SLOTS-1:0]       tbl_start, tbl_done, reading, draining, progress;
    wire [SLOTS*REQ_W-1:0] req_data;
    wire [SLOTS*RSP_W-1:0] rsp_data;
    wire [SLOTS*32-1:0]    engine, tbl_region, tbl_crc;
    wire [SLOTS*DAW-1:0]   tbl_base;
    wire [SLOTS*2-1:0]     tbl_result;
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
        .slot_reload(reload), .slot_engine(engine), .slot_tbl_start(tbl_start),
        .slot_tbl_base(tbl_base), .slot_tbl_region(tbl_region), .slot_tbl_done(tbl_done),
        .slot_tbl_result(tbl_result), .slot_tbl_crc(tbl_crc), .slot_identity(identity),
        .slot_reading(reading), .slot_decoupled(decoupled), .slot_draining(draining),
        .slot_progress(progress), .slot_hold(hold)
    );

    // What a half-configured slot drives.
    reg [31:0] lfsr;
    always @(posedge clk)
        lfsr <= rst ? 32'hACE1_2468 : {lfsr[30:0], lfsr[31] ^ lfsr[21] ^ lfsr[1] ^ lfsr[0]};

    genvar g;
    generate
        for (g = 0; g < SLOTS; g = g + 1) begin : slot
            wire             rp_req_valid, rp_req_ready, rp_rsp_ready, rp_rsp_valid, rp_reload;
            wire [REQ_W-1:0] rp_req_data;
            wire [RSP_W-1:0] rp_rsp_data;
            wire [31:0]      rp_engine, rp_tbl_region, rp_tbl_crc;
            wire             rp_tbl_start, rp_tbl_done, rp_reading;
            wire [DAW-1:0]   rp_tbl_base;
            wire [1:0]       rp_tbl_result;
            wire [255:0]     rp_identity;
            wire [DAW-1:0]   rp_araddr, rp_awaddr;
            wire [7:0]       rp_arlen;
            wire             rp_arvalid, rp_arready, rp_rlast, rp_rvalid, rp_rready;
            wire             rp_awvalid, rp_awready, rp_wvalid, rp_wready, rp_bvalid, rp_bready;
            wire [63:0]      rp_rdata, rp_wdata;
            wire [7:0]       rp_wstrb;
            wire [1:0]       rp_rresp, rp_bresp;
            // A module comes up from its initial state after it is programmed
            // (RESET_AFTER_RECONFIG), and after the shell's reload.
            wire             x_rst = rst || rp_reload || greybox[g] || pr_active[g];

            fabric_decoupler #(.DAW(DAW)) dcp (
                .clk(clk), .rst(rst),
                .s_awvalid(s_awvalid[g + 1]), .s_awready(s_awready[g + 1]), .s_awaddr(s_awaddr),
                .s_wvalid(s_wvalid[g + 1]), .s_wready(s_wready[g + 1]), .s_wdata(s_wdata),
                .s_wstrb(s_wstrb), .s_bvalid(s_bvalid[g + 1]), .s_bready(s_bready[g + 1]),
                .s_bresp(unused_bresp[g + 1]), .s_arvalid(s_arvalid[g + 1]),
                .s_arready(s_arready[g + 1]), .s_araddr(s_araddr), .s_rvalid(s_rvalid[g + 1]),
                .s_rready(s_rready[g + 1]), .s_rdata(s_rdata[32 * (g + 1) +: 32]),
                .s_rresp(unused_resp[g + 1]),
                .decoupled(decoupled[g]), .draining(draining[g]), .progress(progress[g]),
                .sh_req_valid(req_valid[g]), .sh_req_ready(req_ready[g]),
                .sh_req_data(req_data[REQ_W * g +: REQ_W]),
                .sh_rsp_valid(rsp_valid[g]), .sh_rsp_ready(rsp_ready[g]),
                .sh_rsp_data(rsp_data[RSP_W * g +: RSP_W]),
                .sh_reload(reload[g]), .sh_engine(engine[32 * g +: 32]),
                .sh_tbl_start(tbl_start[g]), .sh_tbl_base(tbl_base[DAW * g +: DAW]),
                .sh_tbl_region(tbl_region[32 * g +: 32]), .sh_tbl_done(tbl_done[g]),
                .sh_tbl_result(tbl_result[2 * g +: 2]), .sh_tbl_crc(tbl_crc[32 * g +: 32]),
                .sh_identity(identity[256 * g +: 256]), .sh_reading(reading[g]),
                .ps_araddr(e_araddr[40 * g +: 40]), .ps_arlen(e_arlen[8 * g +: 8]),
                .ps_arvalid(e_arvalid[g]), .ps_arready(e_arready[g]),
                .ps_rdata(e_rdata[64 * g +: 64]), .ps_rresp(e_rresp[2 * g +: 2]),
                .ps_rlast(e_rlast[g]), .ps_rvalid(e_rvalid[g]), .ps_rready(e_rready[g]),
                .ps_awaddr(e_awaddr[40 * g +: 40]), .ps_awvalid(e_awvalid[g]),
                .ps_awready(e_awready[g]), .ps_wdata(e_wdata[64 * g +: 64]),
                .ps_wstrb(e_wstrb[8 * g +: 8]), .ps_wvalid(e_wvalid[g]), .ps_wready(e_wready[g]),
                .ps_bresp(e_bresp[2 * g +: 2]), .ps_bvalid(e_bvalid[g]), .ps_bready(e_bready[g]),
                .rp_req_valid(rp_req_valid), .rp_req_ready(rp_req_ready),
                .rp_req_data(rp_req_data),
                .rp_rsp_valid(rp_rsp_valid), .rp_rsp_ready(rp_rsp_ready),
                .rp_rsp_data(rp_rsp_data),
                .rp_reload(rp_reload), .rp_engine(rp_engine), .rp_tbl_start(rp_tbl_start),
                .rp_tbl_base(rp_tbl_base), .rp_tbl_region(rp_tbl_region),
                .rp_tbl_done(rp_tbl_done), .rp_tbl_result(rp_tbl_result),
                .rp_tbl_crc(rp_tbl_crc), .rp_identity(rp_identity), .rp_reading(rp_reading),
                .rp_araddr(rp_araddr), .rp_arlen(rp_arlen), .rp_arvalid(rp_arvalid),
                .rp_arready(rp_arready), .rp_rdata(rp_rdata), .rp_rresp(rp_rresp),
                .rp_rlast(rp_rlast), .rp_rvalid(rp_rvalid), .rp_rready(rp_rready),
                .rp_awaddr(rp_awaddr), .rp_awvalid(rp_awvalid), .rp_awready(rp_awready),
                .rp_wdata(rp_wdata), .rp_wstrb(rp_wstrb), .rp_wvalid(rp_wvalid),
                .rp_wready(rp_wready), .rp_bresp(rp_bresp), .rp_bvalid(rp_bvalid),
                .rp_bready(rp_bready)
            );

            // The module's outputs: the one the slot holds. Each module
            // ticks only while it is the one: the other, in reset, would
            // cost the co-simulation its evaluation every cycle.
            wire             held_lm = lm_module[g];
            wire             clk_tg = clk & !held_lm;
            wire             clk_lm = clk & held_lm;
            wire             x_req_ready, x_rsp_valid, x_tbl_done, x_reading;
            wire [RSP_W-1:0] x_rsp_data;
            wire [31:0]      x_engine, x_tbl_crc;
            wire [1:0]       x_tbl_result;
            wire [255:0]     x_identity;
            wire [DAW-1:0]   x_araddr, x_awaddr;
            wire [7:0]       x_arlen;
            wire             x_arvalid, x_rready, x_awvalid, x_wvalid, x_bready;
            wire [63:0]      x_wdata;
            wire [7:0]       x_wstrb;
            // What each module drives.
            wire             t_req_ready, t_rsp_valid, t_tbl_done, t_reading;
            wire             l_req_ready, l_rsp_valid, l_tbl_done, l_reading;
            wire [RSP_W-1:0] t_rsp_data, l_rsp_data;
            wire [31:0]      t_engine, t_tbl_crc, l_engine, l_tbl_crc;
            wire [1:0]       t_tbl_result, l_tbl_result;
            wire [255:0]     t_identity, l_identity;
            wire [DAW-1:0]   t_araddr, t_awaddr, l_araddr, l_awaddr;
            wire [7:0]       t_arlen, l_arlen;
            wire             t_arvalid, t_rready, t_awvalid, t_wvalid, t_bready;
            wire             l_arvalid, l_rready, l_awvalid, l_wvalid, l_bready;
            wire [63:0]      t_wdata, l_wdata;
            wire [7:0]       t_wstrb, l_wstrb;
            // What the module sees of the port: nothing while it is being
            // programmed or is a greybox.
            wire             live = !greybox[g] && !pr_active[g];
            wire             s_req_valid = rp_req_valid && step_gate[g] && !greybox[g];
            wire             s_tbl_start = rp_tbl_start && !greybox[g];

            fabric_slot #(.DAW(DAW)) rm_trigram (
                .clk(clk_tg), .rst(x_rst || held_lm),
                .req_valid(s_req_valid), .req_ready(t_req_ready), .req_data(rp_req_data),
                .rsp_valid(t_rsp_valid), .rsp_ready(rp_rsp_ready), .rsp_data(t_rsp_data),
                .engine(t_engine),
                .tbl_start(s_tbl_start), .tbl_base(rp_tbl_base), .tbl_region(rp_tbl_region),
                .tbl_done(t_tbl_done), .tbl_result(t_tbl_result), .tbl_crc(t_tbl_crc),
                .identity(t_identity), .reading(t_reading),
                .m_araddr(t_araddr), .m_arlen(t_arlen), .m_arvalid(t_arvalid),
                .m_arready(rp_arready && live), .m_rdata(rp_rdata), .m_rresp(rp_rresp),
                .m_rlast(rp_rlast), .m_rvalid(rp_rvalid && live), .m_rready(t_rready),
                .m_awaddr(t_awaddr), .m_awvalid(t_awvalid), .m_awready(rp_awready && live),
                .m_wdata(t_wdata), .m_wstrb(t_wstrb), .m_wvalid(t_wvalid),
                .m_wready(rp_wready && live), .m_bresp(rp_bresp),
                .m_bvalid(rp_bvalid && live), .m_bready(t_bready)
            );
            fabric_slot_lm #(.DAW(DAW), .LANES(LANES)) rm_lm (
                .clk(clk_lm), .rst(x_rst || !held_lm),
                .req_valid(s_req_valid), .req_ready(l_req_ready), .req_data(rp_req_data),
                .rsp_valid(l_rsp_valid), .rsp_ready(rp_rsp_ready), .rsp_data(l_rsp_data),
                .engine(l_engine),
                .tbl_start(s_tbl_start), .tbl_base(rp_tbl_base), .tbl_region(rp_tbl_region),
                .tbl_done(l_tbl_done), .tbl_result(l_tbl_result), .tbl_crc(l_tbl_crc),
                .identity(l_identity), .reading(l_reading),
                .m_araddr(l_araddr), .m_arlen(l_arlen), .m_arvalid(l_arvalid),
                .m_arready(rp_arready && live), .m_rdata(rp_rdata), .m_rresp(rp_rresp),
                .m_rlast(rp_rlast), .m_rvalid(rp_rvalid && live), .m_rready(l_rready),
                .m_awaddr(l_awaddr), .m_awvalid(l_awvalid), .m_awready(rp_awready && live),
                .m_wdata(l_wdata), .m_wstrb(l_wstrb), .m_wvalid(l_wvalid),
                .m_wready(rp_wready && live), .m_bresp(rp_bresp),
                .m_bvalid(rp_bvalid && live), .m_bready(l_bready)
            );
            assign x_req_ready = held_lm ? l_req_ready : t_req_ready;
            assign x_rsp_valid = held_lm ? l_rsp_valid : t_rsp_valid;
            assign x_rsp_data = held_lm ? l_rsp_data : t_rsp_data;
            assign x_engine = held_lm ? l_engine : t_engine;
            assign x_tbl_done = held_lm ? l_tbl_done : t_tbl_done;
            assign x_tbl_result = held_lm ? l_tbl_result : t_tbl_result;
            assign x_tbl_crc = held_lm ? l_tbl_crc : t_tbl_crc;
            assign x_identity = held_lm ? l_identity : t_identity;
            assign x_reading = held_lm ? l_reading : t_reading;
            assign x_araddr = held_lm ? l_araddr : t_araddr;
            assign x_arlen = held_lm ? l_arlen : t_arlen;
            assign x_arvalid = held_lm ? l_arvalid : t_arvalid;
            assign x_rready = held_lm ? l_rready : t_rready;
            assign x_awaddr = held_lm ? l_awaddr : t_awaddr;
            assign x_awvalid = held_lm ? l_awvalid : t_awvalid;
            assign x_wdata = held_lm ? l_wdata : t_wdata;
            assign x_wstrb = held_lm ? l_wstrb : t_wstrb;
            assign x_wvalid = held_lm ? l_wvalid : t_wvalid;
            assign x_bready = held_lm ? l_bready : t_bready;

            // The gate: closed, the slot sees no request and READY stays low.
            assign hold[g] = rp_req_valid && !step_gate[g];
            assign step_taken[g] = rp_req_valid && rp_req_ready;
            // Half-programmed logic drives garbage; a greybox drives 0.
            assign rp_req_ready = pr_active[g] ? lfsr[g]
                                : (!greybox[g] && x_req_ready && step_gate[g]);
            assign rp_rsp_valid = pr_active[g] ? lfsr[g + 3] : (!greybox[g] && x_rsp_valid);
            assign rp_rsp_data = pr_active[g] ? {lfsr[10:0], lfsr}
                               : (greybox[g] ? {RSP_W{1'b0}} : x_rsp_data);
            assign rp_engine = pr_active[g] ? lfsr : (greybox[g] ? 32'd0 : x_engine);
            assign rp_tbl_done = pr_active[g] ? lfsr[g + 9] : (!greybox[g] && x_tbl_done);
            assign rp_tbl_result = pr_active[g] ? lfsr[5:4] : (greybox[g] ? 2'd0 : x_tbl_result);
            assign rp_tbl_crc = pr_active[g] ? lfsr : (greybox[g] ? 32'd0 : x_tbl_crc);
            assign rp_identity = pr_active[g] ? {8{lfsr}} : (greybox[g] ? 256'd0 : x_identity);
            assign rp_reading = pr_active[g] ? lfsr[g + 11] : (!greybox[g] && x_reading);
            assign rp_araddr = pr_active[g] ? {lfsr[7:0], lfsr} : (greybox[g] ? 40'd0 : x_araddr);
            assign rp_arlen = pr_active[g] ? lfsr[15:8] : (greybox[g] ? 8'd0 : x_arlen);
            assign rp_arvalid = pr_active[g] ? lfsr[g + 13] : (!greybox[g] && x_arvalid);
            assign rp_rready = pr_active[g] ? lfsr[g + 15] : (!greybox[g] && x_rready);
            assign rp_awaddr = pr_active[g] ? {lfsr[15:8], lfsr} : (greybox[g] ? 40'd0 : x_awaddr);
            assign rp_awvalid = pr_active[g] ? lfsr[g + 17] : (!greybox[g] && x_awvalid);
            assign rp_wdata = pr_active[g] ? {lfsr, lfsr} : (greybox[g] ? 64'd0 : x_wdata);
            assign rp_wstrb = pr_active[g] ? lfsr[23:16] : (greybox[g] ? 8'd0 : x_wstrb);
            assign rp_wvalid = pr_active[g] ? lfsr[g + 19] : (!greybox[g] && x_wvalid);
            assign rp_bready = pr_active[g] ? lfsr[g + 21] : (!greybox[g] && x_bready);
        end
    endgenerate
endmodule

`default_nettype wire
