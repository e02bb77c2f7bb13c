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
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [AW-1:0] s_awaddr,  // bits [1:0]: byte lanes of an aligned word
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire          s_wvalid,
    output reg           s_wready,
    input  wire [31:0]   s_wdata,
    input  wire [3:0]    s_wstrb,
    output reg           s_bvalid,
    input  wire          s_bready,
    output wire [1:0]    s_bresp,
    input  wire          s_arvalid,
    output reg           s_arready,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [AW-1:0] s_araddr,
    /* verilator lint_on UNUSEDSIGNAL */
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
endmodule

`default_nettype wire
