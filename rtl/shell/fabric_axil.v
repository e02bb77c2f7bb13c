// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_axil: an AXI4-Lite slave in front of a simple register port.
//
// One access at a time: a write takes its address and data (in either order
// or together), performs one register write, and answers OKAY on B; a read
// takes its address, reads the register the cycle after, and answers on R.
// A request is accepted only while no response waits, so every request gets
// exactly one response and nothing answers without a request (the properties
// rtl/formal/fabric_axil_props.v proves). Reads win over writes when both
// arrive at once. Only aligned 32-bit accesses exist in the contract: the
// low two address bits and the write strobes are ignored except that a write
// with no strobe set writes nothing.

`default_nettype none

module fabric_axil #(
    parameter integer AW = 12
) (
    input  wire          clk,
    input  wire          rst,

    input  wire          s_awvalid,
    output reg           s_awready,
    input  wire [AW-1:0] s_awaddr,  // bits [1:0]: byte lanes of an aligned word
    input  wire          s_wvalid,
    output reg           s_wready,
    input  wire [31:0]   s_wdata,
    input  wire [3:0]    s_wstrb,
    output reg           s_bvalid,
    input  wire          s_bready,
    output wire [1:0]    s_bresp,
    input  wire          s_arvalid,
    output reg           s_arready,
    input  wire [AW-1:0] s_araddr,
    output reg           s_rvalid,
    input  wire          s_rready,
    output reg  [31:0]   s_rdata,
    output wire [1:0]    s_rresp,

    // The register port: a write strobe, or a read strobe whose data comes
    // back the next cycle.
    output reg           reg_we,
    output reg  [AW-1:0] reg_waddr,
    output reg  [31:0]   reg_wdata,
    output reg           reg_re,
    output reg  [AW-1:0] reg_raddr,
    input  wire [31:0]   reg_rdata
);
    // Accesses are aligned words (contract section 3): the byte lanes of an
    // address are not decoded.
    wire unused_byte_lanes = ^{s_awaddr[1:0], s_araddr[1:0]};
    assign s_bresp = 2'b00;
    assign s_rresp = 2'b00;

    // A write's address and data, each held once accepted until both are
    // here; then one register write and one B.
    reg          have_aw, have_w;
    reg [AW-1:0] aw;
    reg [31:0]   wd;
    reg          wnone;
    // A read: the strobe, the register's answer a cycle later, then R.
    localparam [1:0] R_IDLE = 2'd0, R_STROBE = 2'd1, R_DATA = 2'd2, R_RESP = 2'd3;
    reg [1:0]    rstate;

    always @(posedge clk) begin
        reg_we <= 1'b0;
        reg_re <= 1'b0;
        if (rst) begin
            s_awready <= 1'b0;
            s_wready <= 1'b0;
            s_arready <= 1'b0;
            s_bvalid <= 1'b0;
            s_rvalid <= 1'b0;
            s_rdata <= 32'd0;
            have_aw <= 1'b0;
            have_w <= 1'b0;
            rstate <= R_IDLE;
        end else begin
            case (rstate)
                R_IDLE: begin
                    s_arready <= 1'b1;
                    if (s_arvalid && s_arready) begin
                        s_arready <= 1'b0;
                        reg_re <= 1'b1;
                        reg_raddr <= {s_araddr[AW-1:2], 2'b00};
                        rstate <= R_STROBE;
                    end
                end
                R_STROBE: rstate <= R_DATA;
                R_DATA: begin
                    s_rvalid <= 1'b1;
                    s_rdata <= reg_rdata;
                    rstate <= R_RESP;
                end
                default: begin
                    if (s_rready) begin
                        s_rvalid <= 1'b0;
                        rstate <= R_IDLE;
                    end
                end
            endcase

            if (s_awvalid && s_awready) begin
                have_aw <= 1'b1;
                aw <= {s_awaddr[AW-1:2], 2'b00};
            end
            if (s_wvalid && s_wready) begin
                have_w <= 1'b1;
                wd <= s_wdata;
                wnone <= (s_wstrb == 4'b0000);
            end
            s_awready <= !have_aw && !s_bvalid && !(s_awvalid && s_awready);
            s_wready <= !have_w && !s_bvalid && !(s_wvalid && s_wready);
            if (have_aw && have_w) begin
                reg_we <= !wnone;
                reg_waddr <= aw;
                reg_wdata <= wd;
                have_aw <= 1'b0;
                have_w <= 1'b0;
                s_bvalid <= 1'b1;
                s_awready <= 1'b0;
                s_wready <= 1'b0;
            end
            if (s_bvalid && s_bready) begin
                s_bvalid <= 1'b0;
                s_awready <= 1'b1;
                s_wready <= 1'b1;
            end
        end
    end
`ifdef FORMAL
    // ---- formal properties (scripts/formal; Yosys read_verilog -formal) ----
    // The AXI4-Lite rules at the ports, and the counts of what is
    // outstanding on each channel.
    wire [1:0] f_awo, f_wo, f_aro;
    fabric_axil_props #(.AW(AW)) f_axi (
        .clk(clk), .rst(rst),
        .s_awvalid(s_awvalid), .s_awready(s_awready), .s_awaddr(s_awaddr),
        .s_wvalid(s_wvalid), .s_wready(s_wready), .s_wdata(s_wdata), .s_wstrb(s_wstrb),
        .s_bvalid(s_bvalid), .s_bready(s_bready), .s_bresp(s_bresp),
        .s_arvalid(s_arvalid), .s_arready(s_arready), .s_araddr(s_araddr),
        .s_rvalid(s_rvalid), .s_rready(s_rready), .s_rdata(s_rdata), .s_rresp(s_rresp),
        .f_awo(f_awo), .f_wo(f_wo), .f_aro(f_aro)
    );

    reg f_past_valid = 1'b0;
    always @(posedge clk)
        f_past_valid <= 1'b1;

    // What the master sent with the access under way: the write's address,
    // data and strobes, the read's address, and the register's answer to the
    // read strobe (on reg_rdata the cycle after it).
    reg [AW-1:0] f_aw, f_ar;
    reg [31:0]   f_wd, f_rans;
    reg [3:0]    f_wstrb;
    reg          f_re_d;
    always @(posedge clk) begin
        if (s_awvalid && s_awready)
            f_aw <= s_awaddr;
        if (s_wvalid && s_wready) begin
            f_wd <= s_wdata;
            f_wstrb <= s_wstrb;
        end
        if (s_arvalid && s_arready)
            f_ar <= s_araddr;
        f_re_d <= reg_re && !rst;
        if (f_re_d)
            f_rans <= reg_rdata;
    end

    // The cycle B (R) is raised: low the cycle before, and not by reset.
    reg f_rst_d, f_bvalid_d, f_rvalid_d;
    always @(posedge clk) begin
        f_rst_d <= rst;
        f_bvalid_d <= s_bvalid;
        f_rvalid_d <= s_rvalid;
    end
    wire f_b_rises = f_past_valid && !f_rst_d && s_bvalid && !f_bvalid_d;
    wire f_r_rises = f_past_valid && !f_rst_d && s_rvalid && !f_rvalid_d;

    // One register write for each write's AW and W pair: reg_we pulses in
    // the cycle B is raised for the pair, and only then, with the pair's
    // word address and data; a write with no strobe set writes nothing.
    always @(*)
        if (f_past_valid) begin
            a_we_only_with_b: assert(!reg_we || f_b_rises);
            if (f_b_rises)
                a_we_once_per_write: assert(reg_we == (f_wstrb != 4'b0000));
            if (reg_we)
                a_we_is_the_write: assert(reg_waddr == {f_aw[AW-1:2], 2'b00} && reg_wdata == f_wd);
        end

    // One register read for each AR, the cycle after it, and R carries the
    // register's answer to that strobe.
    always @(posedge clk)
        if (f_past_valid)
            a_re_once_per_read: assert(reg_re == (!$past(rst) && $past(s_arvalid && s_arready)));
    always @(*)
        if (f_past_valid) begin
            if (reg_re)
                a_re_is_the_read: assert(reg_raddr == {f_ar[AW-1:2], 2'b00});
            if (f_r_rises)
                a_r_is_the_answer: assert(s_rdata == f_rans);
        end

    // How the state machine holds those counts (helpers for k-induction).
    always @(*)
        if (f_past_valid && !rst) begin
            h_aw_held: assert(f_awo == {1'b0, have_aw || s_bvalid});
            h_w_held: assert(f_wo == {1'b0, have_w || s_bvalid});
            h_no_aw_beside_b: assert(!(have_aw && s_bvalid));
            h_no_w_beside_b: assert(!(have_w && s_bvalid));
            h_awready: assert(!s_awready || (!have_aw && !s_bvalid));
            h_wready: assert(!s_wready || (!have_w && !s_bvalid));
            h_aw_kept: assert(!have_aw || aw == {f_aw[AW-1:2], 2'b00});
            h_w_kept: assert(!have_w || (wd == f_wd && wnone == (f_wstrb == 4'b0000)));
            h_ar_held: assert(f_aro == {1'b0, rstate != R_IDLE});
            h_rvalid: assert(s_rvalid == (rstate == R_RESP));
            h_arready: assert(!s_arready || rstate == R_IDLE);
            h_re_strobe: assert(reg_re == (rstate == R_STROBE));
            h_re_answer: assert(f_re_d == (rstate == R_DATA));
            h_we_with_b: assert(!reg_we || s_bvalid);
        end
`endif
endmodule

`default_nettype wire
