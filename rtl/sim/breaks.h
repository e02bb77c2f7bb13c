// The deliberate breaks a run asks for (scripts/rtl-mutants).
//
// FABRIC_RTL_BREAK names them, comma-separated; each is handed to the
// model as +fabric_break_<name>, which the RTL built with FABRIC_MUTANTS
// (FABRIC_RTL_MUTANTS set at build time) reads with $test$plusargs in its
// initial blocks, so this runs before the model is made. One build serves
// every break. A plusarg matches by prefix: no name may begin another.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "verilated.h"

inline void fabric_breaks(VerilatedContext* context) {
    const char* list = std::getenv("FABRIC_RTL_BREAK");
    const std::string all(list ? list : "");
#ifndef FCS_MUTANTS
    // A break asked of RTL built without them would pass every test.
    if (!all.empty()) {
        std::fprintf(stderr, "FABRIC_RTL_BREAK=%s: the RTL was built without its breaks "
                             "(build with FABRIC_RTL_MUTANTS=1)\n", list);
        std::abort();
    }
    (void)context;
#else
    // Always, none asked too: Verilator stops a model that reads plusargs
    // it was never given.
    std::vector<std::string> args{"fabric"};
    for (size_t at = 0; at <= all.size();) {
        size_t end = all.find(',', at);
        if (end == std::string::npos)
            end = all.size();
        if (end > at)
            args.push_back("+fabric_break_" + all.substr(at, end - at));
        at = end + 1;
    }
    std::vector<const char*> argv;
    for (const std::string& a : args)
        argv.push_back(a.c_str());
    context->commandArgs(static_cast<int>(argv.size()), argv.data());
#endif
}
