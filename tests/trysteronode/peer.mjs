// A real trystero 0.25.3 peer (the version LiveSync's P2P mode uses) for
// the Go transport's interop test, with WebRTC from @roamhq/wrtc.
//
// Usage: node peer.mjs <relay ws:// URL> <room password> <room id>
//
// It joins the room through the relay and prints one JSON array per
// line: ["self", id], ["join", peer], ["leave", peer], ["joinError", text],
// ["response", envelope], ["served", method]. On rpc2 it speaks a minimal
// RpcRoom (commonlib src/rpc): it reassembles chunked streams and
// acknowledges them, answers every request with {"node": true, "args"},
// and, when a peer joins, sends it the handshake envelope and a request
// for "test.echo". A line on stdin makes it leave the room and exit.
import WebSocket from 'ws';
import wrtc from '@roamhq/wrtc';

class QuietWS extends WebSocket {
  constructor(url) {
    super(url);
    this.on('error', () => {}); // the relay going away at the end of a test
  }
}
globalThis.WebSocket = QuietWS;

// @roamhq/wrtc predates setLocalDescription() without a description,
// which trystero's peer.mjs calls; fill it in as browsers do.
class PC extends wrtc.RTCPeerConnection {
  async setLocalDescription(desc) {
    if (!desc || !desc.type) {
      desc = this.signalingState === 'have-remote-offer' ? await this.createAnswer() : await this.createOffer();
    }
    return super.setLocalDescription(desc);
  }
}

const { joinRoom, selfId } = await import('@trystero-p2p/nostr');
const [relay, password, roomId] = process.argv.slice(2);
const log = (...a) => console.log(JSON.stringify(a));

const room = joinRoom({
  appId: 'self-hosted-livesync',
  password,
  relayConfig: { urls: [relay], manualReconnection: true },
  rtcPolyfill: PC,
  rtcConfig: { iceServers: [] }, // loopback: host candidates only
}, roomId, { onJoinError: (e) => log('joinError', e.error), handshakeTimeoutMs: 30000 });
log('self', selfId);

const rpc = room.makeAction('rpc2');
const send = (data, peer) => rpc.send(data, { target: peer });
const streams = {};

const onEnvelope = (env, peer) => {
  if (env.kind === 'request') {
    log('served', env.method);
    const data = { node: true, args: env.args };
    send({ wire: 'raw', payload: JSON.stringify({ kind: 'response', requestId: env.requestId, ok: true, data }) }, peer);
  } else if (env.kind === 'response') {
    log('response', env);
  }
};

rpc.onMessage = (msg, { peerId }) => {
  if (msg.wire === 'raw') {
    onEnvelope(JSON.parse(msg.payload), peerId);
  } else if (msg.wire === 'chunk') {
    const parts = (streams[msg.streamId] ??= []);
    parts[msg.index] = msg.payload;
    if (Object.keys(parts).length === msg.total) {
      delete streams[msg.streamId];
      send({ wire: 'chunk-ack', streamId: msg.streamId, missing: [] }, peerId);
      onEnvelope(JSON.parse(parts.join('')), peerId);
    }
  }
};

room.onPeerJoin = (peer) => {
  log('join', peer);
  send({ wire: 'raw', payload: JSON.stringify({ kind: 'handshake', versionMajor: 1, versionMinor: 0 }) }, peer);
  const request = { kind: 'request', requestId: 'req-1-abcdefgh', method: 'test.echo', args: ['from node', 'é😀'] };
  send({ wire: 'raw', payload: JSON.stringify(request) }, peer);
};
room.onPeerLeave = (peer) => log('leave', peer);

process.stdin.once('data', async () => {
  await room.leave();
  log('left');
  process.exit(0);
});
setTimeout(() => process.exit(0), 60000).unref();
