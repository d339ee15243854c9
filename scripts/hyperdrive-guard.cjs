// Keeps a reset Hyperdrive connection from killing the process that runs Miniflare (wrangler dev,
// scripts/serve-worker.mjs). Miniflare's local Hyperdrive binding is a TCP proxy in that process
// which pipes the worker's socket and the database's into each other with no 'error' listener
// (cloudflare/workers-sdk#15768, open; miniflare 4.20260426). A reset on either side — workerd
// restarted by wrangler's reload after an edit while a query is in flight, the database going
// away — is then an unhandled 'error' event, and the whole dev server exits.
//
// Loaded before wrangler's own code (`node --require`, scripts/stack.sh) or imported first
// (serve-worker.mjs). It gives what such a proxy lacks, and nothing else: when a socket that a
// server accepted is piped to or from another socket, an error on either destroys both, so the
// other side sees its connection end instead of the process ending.
"use strict";
const net = require("node:net");

const pipe = net.Socket.prototype.pipe;
if (!pipe.kvbenchGuard) {
  net.Socket.prototype.pipe = function (dest, options) {
    if (dest instanceof net.Socket && (this.server || dest.server)) {
      const both = () => {
        this.destroy();
        dest.destroy();
      };
      this.on("error", both);
      dest.on("error", both);
    }
    return pipe.call(this, dest, options);
  };
  net.Socket.prototype.pipe.kvbenchGuard = true;
}
