# Regenerate the protobuf and gRPC code (committed) with `make proto`.
# Needs protoc (Debian: protobuf-compiler) and the two Go plugins below.
PROTOC_GEN_GO_VERSION = v1.36.12
PROTOC_GEN_GO_GRPC_VERSION = v1.5.1
GOBIN ?= $(shell go env GOPATH)/bin

.PHONY: proto tools build test
build:
	go build -o bin/chunkfs ./cmd/chunkfs

tools:
	go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

proto: tools
	PATH="$(GOBIN):$$PATH" protoc -I internal/rpc/pb \
		--go_out=internal/rpc/pb --go_opt=paths=source_relative \
		--go-grpc_out=internal/rpc/pb --go-grpc_opt=paths=source_relative \
		internal/rpc/pb/*.proto

test:
	bash .ci/run
