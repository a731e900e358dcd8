module github.com/ruvio/ruvio/clients/go

go 1.21
