#!/bin/sh
# BEAM 1.0 - a cantilever under a tip load (Euler-Bernoulli), written as a legacy program is: POSIX sh and awk,
# fixed file names, a fixed-format input deck, a printed report. It runs on any POSIX system (no compiler).
#
# Usage:   sh beam.sh [DECK [REPORT]]        (default: beam.in -> beam.out, in the working folder)
#
# The deck: a line starting with '*' is a comment; any other line holds a keyword in columns 1-10 and a number in
# columns 11-30 (C / Fortran E or F notation). Keywords (all needed):
#   YOUNGS    Young's modulus E [Pa]            INERTIA   second moment of area I [m^4]
#   LENGTH    the beam's length L [m]           LOAD      the tip load P [N]
#   STATIONS  n: the deflection is reported at x_k = k L / n, k = 0..n
#
# The report (beam.out): the inputs echoed, then two marker lines
#   TIP DEFLECTION (M)  =  <w(L)>      = P L^3 / (3 E I)
#   TIP SLOPE (RAD)     =  <w'(L)>     = P L^2 / (2 E I)
# then the marker line DEFLECTION ALONG THE BEAM, one header line, and a table of n + 1 rows
#   STATION  X (M)  W (M)              w(x) = P x^2 (3 L - x) / (6 E I)
# (columns: station 1-8, x 9-28, w 29-48; numbers as %20.12E) and the line END OF REPORT.
# Exit status: 0 done; 2 the deck is missing or lacks a keyword; 3 a value is out of range (E, I, L <= 0, n < 1).
set -eu
deck=${1:-beam.in}
report=${2:-beam.out}
if [ ! -r "$deck" ]; then
    echo "BEAM: cannot read the input deck $deck" >&2
    exit 2
fi
awk '
/^\*/ { next }
NF == 0 { next }
{
    key = substr($0, 1, 10); gsub(/ /, "", key)
    text = substr($0, 11, 20); gsub(/ /, "", text)
    value[key] = text + 0; seen[key] = 1
}
END {
    split("YOUNGS INERTIA LENGTH LOAD STATIONS", need, " ")
    for (k = 1; k <= 5; k++)
        if (!(need[k] in seen)) { print "BEAM: the deck lacks the keyword " need[k] > "/dev/stderr"; exit 2 }
    E = value["YOUNGS"]; I = value["INERTIA"]; L = value["LENGTH"]; P = value["LOAD"]; n = int(value["STATIONS"])
    if (E <= 0 || I <= 0 || L <= 0 || n < 1) { print "BEAM: E, I, L must be > 0 and STATIONS >= 1" > "/dev/stderr"; exit 3 }
    EI = E * I
    print " BEAM 1.0 - CANTILEVER UNDER A TIP LOAD"
    print " --------------------------------------"
    printf " YOUNGS MODULUS (PA) = %20.12E\n", E
    printf " INERTIA (M4)        = %20.12E\n", I
    printf " LENGTH (M)          = %20.12E\n", L
    printf " TIP LOAD (N)        = %20.12E\n", P
    print ""
    printf " TIP DEFLECTION (M)  = %20.12E\n", P * L * L * L / (3 * EI)
    printf " TIP SLOPE (RAD)     = %20.12E\n", P * L * L / (2 * EI)
    print ""
    print " DEFLECTION ALONG THE BEAM"
    print " STATION               X (M)               W (M)"
    for (k = 0; k <= n; k++) {
        x = k * L / n
        printf "%8d%20.12E%20.12E\n", k, x, P * x * x * (3 * L - x) / (6 * EI)
    }
    print " END OF REPORT"
}' "$deck" > "$report"
