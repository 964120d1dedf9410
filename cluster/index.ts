export { startEmbeddedNats, natsServerBinary, type EmbeddedNats } from "./embedded-nats.js";
