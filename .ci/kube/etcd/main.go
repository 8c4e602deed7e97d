// The etcd server, as etcd's own server/main.go starts it: a package of this module so that `go build`
// names the binary etcd and uses the versions pinned here (etcd's go.mod has replace directives, so
// `go install go.etcd.io/etcd/server/v3@version` is refused).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
