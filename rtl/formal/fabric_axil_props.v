// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_axil_props: the AXI4-Lite rules, seen from a slave's ports, for
// Yosys's formal flow (read_verilog -formal; scripts/formal). fabric_axil
// instantiates it under `ifdef FORMAL`, as ZipCPU's wb2axip instantiates
// faxil_slave beside each slave; these properties are our own.
//
// The master's side (AMBA AXI4-Lite, IHI 0022, A3.1 and A3.2) is assumed:
// VALIDs low in reset, and a VALID with its payload held until READY. The
// slave's side is asserted:
//   - every response answers a request: the counts of accepted AW, W and AR
//     minus the B and R sent never go below zero, and (this slave takes one
//     access at a time) never above one;
//   - every request is answered, within a bound (a bounded form of "exactly
//     one response": with the counts, one and only one);
//   - BVALID and RVALID, and their payloads, are held until accepted;
//   - the slave stalls no channel: with nothing outstanding, its READYs come
//     back within a bound.
// The counts are outputs, so the slave can tie its own state to them (which
// k-induction needs).

`default_nettype none

module fabric_axil_props #(
    parameter integer AW = 12
) (
    input  wire          clk,
    input  wire          rst,

    input  wire          s_awvalid,
    input  wire          s_awready,
    input  wire [AW-1:0] s_awaddr,
    input  wire          s_wvalid,
    input  wire          s_wready,
    input  wire [31:0]   s_wdata,
    input  wire [3:0]    s_wstrb,
    input  wire          s_bvalid,
    input  wire          s_bready,
    input  wire [1:0]    s_bresp,
    input  wire          s_arvalid,
    input  wire          s_arready,
    input  wire [AW-1:0] s_araddr,
    input  wire          s_rvalid,
    input  wire          s_rready,
    input  wire [31:0]   s_rdata,
    input  wire [1:0]    s_rresp,

    // Accepted minus answered, per channel: AW and W against B, AR against R.
    output reg  [1:0]    f_awo,
    output reg  [1:0]    f_wo,
    output reg  [1:0]    f_aro
);
    reg f_past_valid = 1'b0;
    always @(posedge clk)
        f_past_valid <= 1'b1;

    wire aw_hs = s_awvalid && s_awready;
    wire w_hs = s_wvalid && s_wready;
    wire b_hs = s_bvalid && s_bready;
    wire ar_hs = s_arvalid && s_arready;
    wire r_hs = s_rvalid && s_rready;

    // ---- the master (assumed) ------------------------------------------------

    // The run starts in reset.
    always @(*)
        if (!f_past_valid)
            assume(rst);

    // A3.1.2: a master drives its VALIDs low during reset.
    always @(*)
        if (rst)
            assume(!s_awvalid && !s_wvalid && !s_arvalid);

    // A3.2.1: once VALID is high, it and the payload stay until READY.
    always @(posedge clk)
        if (f_past_valid && !$past(rst) && !rst) begin
            if ($past(s_awvalid && !s_awready))
                assume(s_awvalid && s_awaddr == $past(s_awaddr));
            if ($past(s_wvalid && !s_wready))
                assume(s_wvalid && s_wdata == $past(s_wdata) && s_wstrb == $past(s_wstrb));
            if ($past(s_arvalid && !s_arready))
                assume(s_arvalid && s_araddr == $past(s_araddr));
        end

    // ---- the outstanding counts -------------------------------------------------

    initial f_awo = 2'd0;
    initial f_wo = 2'd0;
    initial f_aro = 2'd0;
    always @(posedge clk)
        if (rst) begin
            f_awo <= 2'd0;
            f_wo <= 2'd0;
            f_aro <= 2'd0;
        end else begin
            f_awo <= f_awo + {1'b0, aw_hs} - {1'b0, b_hs};
            f_wo <= f_wo + {1'b0, w_hs} - {1'b0, b_hs};
            f_aro <= f_aro + {1'b0, ar_hs} - {1'b0, r_hs};
        end

    // ---- the slave (asserted) ---------------------------------------------------

    always @(posedge clk)
        if (f_past_valid && $past(rst))
            // Out of reset, no response is waiting.
            a_reset_no_response: assert(!s_bvalid && !s_rvalid);

    always @(*)
        if (f_past_valid) begin
            // One access at a time, per direction: never more than one
            // accepted and unanswered (a count below zero would wrap to 3).
            a_aw_at_most_one: assert(f_awo <= 2'd1);
            a_w_at_most_one: assert(f_wo <= 2'd1);
            a_ar_at_most_one: assert(f_aro <= 2'd1);
            // No response without a request: B only once both AW and W of
            // a write were accepted, R only once an AR was.
            a_b_needs_aw_and_w: assert(!s_bvalid || (f_awo == 2'd1 && f_wo == 2'd1));
            a_r_needs_ar: assert(!s_rvalid || f_aro == 2'd1);
        end

    // A3.2.1: the slave's VALIDs and payloads stay until READY.
    always @(posedge clk)
        if (f_past_valid && !$past(rst)) begin
            if ($past(s_bvalid && !s_bready))
                a_b_held: assert(s_bvalid && s_bresp == $past(s_bresp));
            if ($past(s_rvalid && !s_rready))
                a_r_held: assert(s_rvalid && s_rdata == $past(s_rdata) &&
                                 s_rresp == $past(s_rresp));
        end

    // Every request is answered: B comes at most two cycles after the
    // second of AW and W, R at most three after AR. Each counter counts the
    // cycles a request has waited for its response to be raised.
    reg [2:0] f_bwait, f_rwait;
    initial f_bwait = 3'd0;
    initial f_rwait = 3'd0;
    always @(posedge clk)
        if (rst) begin
            f_bwait <= 3'd0;
            f_rwait <= 3'd0;
        end else begin
            f_bwait <= (f_awo == 2'd1 && f_wo == 2'd1 && !s_bvalid) ? f_bwait + 3'd1 : 3'd0;
            f_rwait <= (f_aro == 2'd1 && !s_rvalid) ? f_rwait + 3'd1 : 3'd0;
        end
    always @(*) begin
        a_b_within_bound: assert(f_bwait <= 3'd1);
        a_r_within_bound: assert(f_rwait <= 3'd2);
    end

    // No channel stalls: with nothing of its kind outstanding, AWREADY,
    // WREADY and ARREADY are high within a cycle of the last response
    // (two out of reset).
    reg [1:0] f_awstall, f_wstall, f_arstall;
    initial f_awstall = 2'd0;
    initial f_wstall = 2'd0;
    initial f_arstall = 2'd0;
    always @(posedge clk) begin
        f_awstall <= (!rst && f_awo == 2'd0 && !s_awready) ? f_awstall + 2'd1 : 2'd0;
        f_wstall <= (!rst && f_wo == 2'd0 && !s_wready) ? f_wstall + 2'd1 : 2'd0;
        f_arstall <= (!rst && f_aro == 2'd0 && !s_arready) ? f_arstall + 2'd1 : 2'd0;
    end
    always @(*) begin
        a_aw_ready_within_bound: assert(f_awstall <= 2'd1);
        a_w_ready_within_bound: assert(f_wstall <= 2'd1);
        a_ar_ready_within_bound: assert(f_arstall <= 2'd1);
    end
endmodule

`default_nettype wire
