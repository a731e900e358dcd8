module ruvio.dev/faults

go 1.22

require github.com/anishathalye/porcupine v1.3.1 // indirect
