# Writes the file IN as one C++ raw string literal to OUT, for a source to
# #include where a string literal goes: assets kept as their own files
# (interceptors/http/deadlinez.html) and compiled into the library.
# Run as: cmake -DIN=<file> -DOUT=<file> -P embed_file.cmake
file(READ "${IN}" content)
set(delimiter "HOPBUDGET_EMBED")
string(FIND "${content}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains )${delimiter}\", which ends the literal")
endif()
file(WRITE "${OUT}.tmp" "R\"${delimiter}(${content})${delimiter}\"\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
