ptf ~
* BEAM INPUT DECK, WRITTEN FROM A PEST TEMPLATE (FIXED FORMAT: COLUMNS 1-10 KEYWORD, 11-30 VALUE)
YOUNGS    ~ E                ~
INERTIA   ~ I                ~
LENGTH    ~ L                ~
LOAD      ~ P                ~
STATIONS                    10
