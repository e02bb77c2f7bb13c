// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_slot: what a PR slot holds: a model's table in block RAM (or
// UltraRAM), initialised from TABLE_HEX (written by `mktable` from a model
// image), and the engine that decodes from it. Each model is one
// reconfigurable module: this module synthesised with another table. A
// partial bitstream carries the table as the memory's initial contents, so
// loading a slot replaces the model; the engine reads the table's header
// again when the shell says the slot was reloaded (reset after
// reconfiguration).

`default_nettype none

module fabric_slot #(
    parameter TABLE_HEX = "",
    parameter integer TABLE_WORDS = 1024,
    parameter integer AW = 20
) (
    input  wire         clk,
    input  wire         rst,

    input  wire         req_valid,
    output wire         req_ready,
    input  wire [31:0]  req_a,
    input  wire [31:0]  req_b,
    input  wire [31:0]  req_draw,
    input  wire         req_greedy,
    input  wire [19:0]  req_inv_t,
    output wire         rsp_valid,
    input  wire         rsp_ready,
    output wire [31:0]  rsp_token,
    output wire         rsp_fault,
    input  wire         reload,
    output wire         table_ok,
    output wire         table_blank,
    output wire [255:0] identity
);
    reg [31:0] table_mem [0:TABLE_WORDS-1];
    reg [31:0] mem_q;
    wire [AW-1:0] mem_addr;
    /* verilator lint_off UNUSEDSIGNAL */
    wire          mem_en;
    /* verilator lint_on UNUSEDSIGNAL */

    initial begin
        if (TABLE_HEX != "")
            $readmemh(TABLE_HEX, table_mem);
    end

`ifdef VERILATOR
    // The co-simulation writes a table here as a partial load would: the
    // configuration port, not a port of the design.
    export "DPI-C" function fabric_table_write;
    function void fabric_table_write(input int addr, input int data);
        if (addr >= 0 && addr < TABLE_WORDS)
            table_mem[addr] = data;
    endfunction
`endif

    // The engine registers the address (its mem_addr is a flip-flop), so
    // this is a synchronous read: block RAM's, with the address register
    // merged into the RAM when synthesis flattens the slot.
    always @(*)
        mem_q = ({{(32 - AW){1'b0}}, mem_addr} < TABLE_WORDS) ? table_mem[mem_addr] : 32'd0;

    fabric_engine #(.AW(AW)) engine (
        .clk(clk), .rst(rst), .reload(reload),
        .table_ok(table_ok), .table_blank(table_blank), .identity(identity),
        .req_valid(req_valid), .req_ready(req_ready),
        .req_a(req_a), .req_b(req_b), .req_draw(req_draw),
        .req_greedy(req_greedy), .req_inv_t(req_inv_t),
        .rsp_valid(rsp_valid), .rsp_ready(rsp_ready),
        .rsp_token(rsp_token), .rsp_fault(rsp_fault),
        .mem_addr(mem_addr), .mem_en(mem_en), .mem_data(mem_q)
    );
endmodule

`default_nettype wire
