// A person on matrix-js-sdk with its Rust crypto (the engine under Element), for the e2e tests.
// Driven over stdin/stdout, one JSON object a line: {"id": N, "cmd": ..., ...} -> {"id": N, "ok": true, ...}
// or {"id": N, "ok": false, "error": "..."}. Several devices ("name") can live in one process.
//   login {name, hs, user, password, cross_sign, isolation: "signed"|"all", room}
//   wait_event {name, room, session_id?, seq?, body?, sender?, after?, timeout} -> {event_id, type, content, shield, reason,
//              count (how many such events this device holds)}
//   send {name, room, body, reply_to?, extra?} -> {event_id}   (extra: more content fields, e.g. a structured answer)
//   reset_identity {name}   (a new master key, as "reset cryptographic identity" in Element)
//   bootstrap_cross_signing {name} -> {master}   (the account's first identity, made by this device, as Element
//              does right after a first login)
//   setup_secret_storage {name} -> {recovery_key}   (cross-signing + secret storage, as Element's set-up)
//   stop {name}
import * as readline from "node:readline";
import * as sdk from "matrix-js-sdk";
import { decodeRecoveryKey } from "matrix-js-sdk/lib/crypto-api/index.js";

const quiet = { debug() {}, info() {}, warn() {}, error() {}, trace() {}, getChild() { return quiet; } };
const devices = new Map(); // name -> { client, user, password, events: [], secretKey }

function reply(obj) { process.stdout.write(JSON.stringify(obj) + "\n"); }

function passwordAuth(dev) {
  return async (makeRequest) => {
    await makeRequest({ type: "m.login.password", identifier: { type: "m.id.user", user: dev.user },
      password: dev.password });
  };
}

async function login(m) {
  const login = await sdk.createClient({ baseUrl: m.hs, logger: quiet }).loginRequest({
    type: "m.login.password", identifier: { type: "m.id.user", user: m.user }, password: m.password });
  const dev = { user: m.user, password: m.password, events: [], secretKey: null };
  const client = sdk.createClient({
    baseUrl: m.hs, accessToken: login.access_token, userId: login.user_id, deviceId: login.device_id,
    logger: quiet,
    cryptoCallbacks: {
      getSecretStorageKey: async ({ keys }) => {
        const id = Object.keys(keys)[0];
        return dev.secretKey ? [id, dev.secretKey] : null;
      },
    },
  });
  dev.client = client;
  await client.initRustCrypto({ useIndexedDB: false });
  const crypto = client.getCrypto();
  if (m.cross_sign) {
    await crypto.bootstrapCrossSigning({ authUploadDeviceSigningKeys: passwordAuth(dev) });
  }
  if (m.isolation === "signed") crypto.setDeviceIsolationMode(new sdk.Crypto.OnlySignedDevicesIsolationMode());
  client.on(sdk.MatrixEventEvent.Decrypted, (ev) => dev.events.push(ev));
  client.on(sdk.RoomEvent.Timeline, (ev) => { if (!ev.isEncrypted()) dev.events.push(ev); });
  const prepared = new Promise((resolve) => client.on(sdk.ClientEvent.Sync, (s) => { if (s === "PREPARED") resolve(); }));
  await client.startClient({ initialSyncLimit: 20 });
  await prepared;
  if (m.room && !client.getRoom(m.room)?.getMyMembership?.()) await client.joinRoom(m.room).catch(() => {});
  devices.set(m.name, dev);
  return { device_id: login.device_id, user_id: login.user_id };
}

function matches(ev, m) {
  if (m.room && ev.getRoomId() !== m.room) return false;
  if (m.sender && ev.getSender() !== m.sender) return false;
  if (m.after && ev.getTs() < m.after) return false;
  const c = ev.getContent();
  if (m.session_id && (c.session_id !== m.session_id || c["m.relates_to"]?.rel_type === "m.replace")) return false;
  if (m.seq !== undefined && c.request_seq !== m.seq) return false;
  // an edit matches by what a client shows of it: its m.new_content (the fallback body is the outcome line only)
  const shown = [c.body, c["m.new_content"]?.body].filter((b) => typeof b === "string");
  if (m.body && !shown.some((b) => b.includes(m.body))) return false;
  if (m.event_id && ev.getId() !== m.event_id) return false;
  return true;
}

async function waitEvent(m) {
  const dev = devices.get(m.name);
  const deadline = Date.now() + (m.timeout ?? 30) * 1000;
  while (Date.now() < deadline) {
    const ev = dev.events.find((e) => matches(e, m));
    if (ev) {
      const info = ev.isEncrypted() ? await dev.client.getCrypto().getEncryptionInfoForEvent(ev) : null;
      return { event_id: ev.getId(), type: ev.getType(), content: ev.getContent(), encrypted: ev.isEncrypted(),
        count: dev.events.filter((e) => matches(e, m)).length,
        decryption_failure: ev.decryptionFailureReason ?? null,
        shield: info ? info.shieldColour : null, reason: info ? info.shieldReason : null };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { event_id: null };
}

async function send(m) {
  const dev = devices.get(m.name);
  const content = { msgtype: "m.text", body: m.body };
  if (m.reply_to) content["m.relates_to"] = { "m.in_reply_to": { event_id: m.reply_to } };
  if (m.extra) Object.assign(content, m.extra);
  const r = await dev.client.sendMessage(m.room, content);
  return { event_id: r.event_id };
}

async function resetIdentity(m) {
  const dev = devices.get(m.name);
  await dev.client.getCrypto().bootstrapCrossSigning({ setupNewCrossSigning: true,
    authUploadDeviceSigningKeys: passwordAuth(dev) });
  const id = await dev.client.getCrypto().getCrossSigningKeyId();
  return { master: id };
}

async function bootstrapCrossSigning(m) {
  const crypto = devices.get(m.name).client.getCrypto();
  await crypto.bootstrapCrossSigning({ authUploadDeviceSigningKeys: passwordAuth(devices.get(m.name)) });
  return { master: await crypto.getCrossSigningKeyId() };
}

async function setupSecretStorage(m) {
  const dev = devices.get(m.name);
  const crypto = dev.client.getCrypto();
  const key = await crypto.createRecoveryKeyFromPassphrase();
  dev.secretKey = decodeRecoveryKey(key.encodedPrivateKey);
  await crypto.bootstrapSecretStorage({ createSecretStorageKey: async () => key, setupNewSecretStorage: true });
  await crypto.bootstrapCrossSigning({ authUploadDeviceSigningKeys: passwordAuth(dev) });
  return { recovery_key: key.encodedPrivateKey, master: await crypto.getCrossSigningKeyId() };
}

const handlers = { login, wait_event: waitEvent, send, reset_identity: resetIdentity,
  bootstrap_cross_signing: bootstrapCrossSigning,
  setup_secret_storage: setupSecretStorage,
  stop: async (m) => { devices.get(m.name)?.client.stopClient(); devices.delete(m.name); return {}; } };

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", async (line) => {
  let m;
  try { m = JSON.parse(line); } catch { return; }
  try {
    reply({ id: m.id, ok: true, ...(await handlers[m.cmd](m)) });
  } catch (e) {
    reply({ id: m.id, ok: false, error: String(e?.stack ?? e) });
  }
});
rl.on("close", () => { for (const d of devices.values()) d.client.stopClient(); process.exit(0); });
