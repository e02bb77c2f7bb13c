// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_lm_wr: the transformer engine's writes (each context's keys and
// values, into DDR): one 32-bit word a write, a single beat of the port's
// width with the word's four strobes (AMBA AXI, IHI 0022, A3.4.3: a narrow
// write's lanes are chosen by WSTRB), up to MAX_OUT writes awaiting their
// responses. The address and the data are offered together and each held
// until taken. `idle` once every write is answered: the engine reads a
// key back only after it (AXI orders no read after a write on its own).
// `err` holds any response but OKAY until `clear`.

`default_nettype none

module fabric_lm_wr #(
    parameter integer AW = 40,
    parameter integer DW = 64,
    parameter integer MAX_OUT = 8,
    // Derived from the parameters above: leave them be.
    parameter integer SZ = $clog2(DW / 8),
    parameter integer OW = $clog2(MAX_OUT + 1)
) (
    input  wire            clk,
    input  wire            rst,

    input  wire            w_valid,
    output wire            w_ready,
    input  wire [AW-1:0]   w_addr,        // 4-byte aligned
    input  wire [31:0]     w_data,
    input  wire            clear,
    output wire            idle,
    output reg             err,

    output reg  [AW-1:0]   m_awaddr,
    output wire [7:0]      m_awlen,
    output wire [2:0]      m_awsize,
    output wire [1:0]      m_awburst,
    output reg             m_awvalid,
    input  wire            m_awready,
    output reg  [DW-1:0]   m_wdata,
    output reg  [DW/8-1:0] m_wstrb,
    output wire            m_wlast,
    output reg             m_wvalid,
    input  wire            m_wready,
    input  wire [1:0]      m_bresp,
    input  wire            m_bvalid,
    output wire            m_bready
);
    localparam [2:0] SIZE = SZ[2:0];
    localparam integer WPB = DW / 32;
    localparam integer LW = (WPB > 1) ? $clog2(WPB) : 1;

    assign m_awlen = 8'd0;
    assign m_awsize = SIZE;
    assign m_awburst = 2'b01;
    assign m_wlast = 1'b1;
    assign m_bready = 1'b1;

    reg  [OW-1:0] out_n;          // writes offered and not yet answered
    wire          issue = w_valid && w_ready;
    wire          answer = m_bvalid;
    assign w_ready = !m_awvalid && !m_wvalid && out_n < MAX_OUT[OW-1:0];
    assign idle = !m_awvalid && !m_wvalid && out_n == {OW{1'b0}};

    wire [LW-1:0] lane = (WPB > 1) ? w_addr[SZ-1:2] : {LW{1'b0}};
    wire [1:0]    unused_addr = w_addr[1:0];
    wire [DW/8-1:0] strb = {{(DW/8 - 4){1'b0}}, 4'hF} << {lane, 2'b00};
    wire [DW-1:0]   data = {{(DW - 32){1'b0}}, w_data} << {lane, 5'd0};

    always @(posedge clk) begin
        if (rst) begin
            m_awvalid <= 1'b0;
            m_wvalid <= 1'b0;
            out_n <= {OW{1'b0}};
            err <= 1'b0;
        end else begin
            if (m_awvalid && m_awready)
                m_awvalid <= 1'b0;
            if (m_wvalid && m_wready)
                m_wvalid <= 1'b0;
            if (issue) begin
                m_awvalid <= 1'b1;
                m_awaddr <= {w_addr[AW-1:SZ], {SZ{1'b0}}};
                m_wvalid <= 1'b1;
                m_wdata <= data;
                m_wstrb <= strb;
            end
            out_n <= out_n + {{(OW - 1){1'b0}}, issue} - {{(OW - 1){1'b0}}, answer};
            if (clear)
                err <= 1'b0;
            else if (answer && m_bresp != 2'b00)
                err <= 1'b1;
        end
    end
endmodule

`default_nettype wire
