// Copyright hopbudget authors.
//
// go_ledger: a grpc-go peer we did not write, for foreign_peer_test.py
// (Debian's golang-google-grpc-dev and golang-google-genproto-dev, built in
// GOPATH mode by tests/python/CMakeLists.txt). It has no generated code: it
// answers every call, whatever the method, DEADLINE_EXCEEDED with its own
// message and its own details, as a grpc-go service does with
// status.WithDetails. The message is the request's field 1 read as a string
// (Relay.Call's payload), so the test chooses it; the details are an
// ErrorInfo of the ledger's domain and a DebugInfo.
//
// Prints its address, "127.0.0.1:PORT", then serves until its standard
// input closes.
package main

import (
	"fmt"
	"io"
	"io/ioutil"
	"net"
	"os"

	"github.com/golang/protobuf/ptypes/wrappers"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func answer(_ interface{}, stream grpc.ServerStream) error {
	// A RelayRequest read as a StringValue: its payload is field 1, a
	// string; its steps stay unknown fields.
	var req wrappers.StringValue
	if err := stream.RecvMsg(&req); err != nil && err != io.EOF {
		return err
	}
	st, err := status.New(codes.DeadlineExceeded, req.GetValue()).WithDetails(
		&errdetails.ErrorInfo{
			Domain:   "ledger.example.com",
			Reason:   "DB_TIMEOUT",
			Metadata: map[string]string{"table": "ledger_entries"},
		},
		&errdetails.DebugInfo{Detail: "db1 primary"})
	if err != nil {
		return status.Errorf(codes.Internal, "go ledger: %v", err)
	}
	return st.Err()
}

func main() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "go_ledger:", err)
		os.Exit(1)
	}
	s := grpc.NewServer(grpc.UnknownServiceHandler(answer))
	fmt.Println(lis.Addr().String())
	go func() {
		ioutil.ReadAll(os.Stdin)
		s.Stop()
	}()
	if err := s.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, "go_ledger:", err)
		os.Exit(1)
	}
}
