/**
 * Names for the request and response shapes of `openapi/openapi.json`, taken from the
 * generated types (`./generated/openapi.ts`), so they follow the API when it changes.
 * Request fields are spelled as the API spells them (snake_case).
 */

import type { components, operations } from "./generated/openapi.js";

export type { components, operations, paths } from "./generated/openapi.js";

export type Schemas = components["schemas"];
export type OperationId = keyof operations;

/** The query parameters of an operation (by operationId). */
export type QueryOf<K extends OperationId> = operations[K]["parameters"] extends { query?: infer Q }
  ? Exclude<Q, undefined>
  : never;

/** The JSON request body of an operation (by operationId). */
export type BodyOf<K extends OperationId> = operations[K] extends {
  requestBody?: { content: { "application/json": infer B } };
}
  ? Exclude<B, null | undefined>
  : never;

/** Query parameters without the cursor: for the `iter*` methods (`limit` is the page size). */
export type PageQuery<K extends OperationId> = Omit<QueryOf<K>, "cursor">;

// sessions and messages
export type Session = Schemas["SessionPublic"];
export type SessionCreate = Schemas["SessionCreate"];
export type SessionUpdate = Schemas["SessionUpdate"];
export type SessionConfig = Schemas["SessionConfig"];
export type SessionList = Schemas["SessionList"];
export type MessageIn = Schemas["MessageIn"];
export type Message = Schemas["MessagePublic"];
export type MessageList = Schemas["MessageList"];
export type MessagesAppended = Schemas["MessagesAppended"];

// context and manifests
export type ContextRequest = Schemas["ContextRequest"];
export type ContextResponse = Schemas["ContextPublic"];
export type RecallInput = Schemas["RecallInput"];
export type ContextList = Schemas["ContextList"];
export type ContextSummary = Schemas["ContextSummaryPublic"];
export type ContextManifest = Schemas["ManifestPublic"];
export type ContextReplay = Schemas["ReplayPublic"];
export type ContextDiff = Schemas["ContextDiffPublic"];

// memory layers, kernel, search, tools, jobs
export type Memory = Schemas["MemoryPublic"];
export type CompressResult = Schemas["CompressPublic"];
export type PromoteRequest = Schemas["app__memory__schemas__PromoteRequest"];
export type PromoteResult = Schemas["PromotePublic"];
export type Cleared = Schemas["ClearedPublic"];
export type SnapshotList = Schemas["SnapshotList"];
export type Snapshot = Schemas["SnapshotPublic"];
export type Kernel = Schemas["KernelPublic"];
export type KernelSchema = Schemas["KernelSchemaPublic"];
export type ToolDefinition = Schemas["ToolDefinition"];
export type SearchRequest = Schemas["SearchCreate"];
export type SessionSearchRequest = Schemas["SessionSearchCreate"];
export type SearchResult = Schemas["SearchPublic"];
export type SearchHit = Schemas["SearchHitPublic"];
export type ToolList = Schemas["ToolListPublic"];
export type ToolResult = Schemas["ToolResultPublic"];
export type JobList = Schemas["JobList"];
export type Job = Schemas["JobListed"];

// knowledge items and facts
export type MemoryItem = Schemas["MemoryItemPublic"];
export type MemoryItemCreate = Schemas["MemoryItemCreate"];
export type MemoryItemUpdate = Schemas["MemoryItemUpdate"];
export type MemoryItemQuery = Schemas["MemoryItemQuery"];
export type MemoryItemList = Schemas["MemoryItemList"];
export type MemoryItemHistory = Schemas["MemoryItemHistory"];
export type ClearRequest = Schemas["ClearRequest"];
export type ClearResult = Schemas["ClearResult"];
export type ExtractResult = Schemas["ExtractPublic"];
export type FactExtraction = Schemas["FactExtractionPublic"];
export type TaskCompleteResult = Schemas["TaskCompleteResult"];
export type ContextPackageRequest = Schemas["ContextPackageCreate"];
export type ContextPackage = Schemas["ContextPackagePublic"];
export type Learned = Schemas["LearnedPublic"];
export type LearnedContent = Schemas["LearnedContent"];
export type Profile = Schemas["ProfilePublic"];
export type ProfileUpdate = Schemas["ProfileUpdate"];

// shared memory
export type Namespace = Schemas["Namespace"];
export type SharedMemoryEntry = Schemas["SharedMemoryEntryPublic"];
export type SharedMemoryKeyList = Schemas["SharedMemoryKeyList"];
export type SharedMemoryKey = Schemas["SharedMemoryKey"];
export type SharedMemoryStats = Schemas["SharedMemoryStats"];
export type DataReference = Schemas["DataReference"];

// users, erasure, export / import
export type User = Schemas["UserPublic"];
export type UserList = Schemas["UserList"];
export type UsageReport = Schemas["UsageReport"];
export type UsageGroup = Schemas["UsageGroup"];
export type Budget = Schemas["BudgetPublic"];
export type Erasure = Schemas["ErasurePublic"];
export type ErasureList = Schemas["ErasureList"];
export type ImportResult = Schemas["ImportResult"];

// tenants, keys, identity
export type Tenant = Schemas["TenantPublic"];
export type TenantCreate = Schemas["TenantCreate"];
export type ApiKeyCreate = Schemas["ApiKeyCreate"];
export type ApiKeyCreated = Schemas["ApiKeyCreated"];
export type ApiKey = Schemas["ApiKeyPublic"];
export type ApiKeyList = Schemas["ApiKeyList"];
export type WhoAmI = Schemas["WhoAmI"];
export type ErrorEnvelope = Schemas["ErrorEnvelope"];

/** A raw (non-JSON) shared-memory value or data reference: the bytes and the entry headers. */
export interface SharedMemoryBlob {
  content: Uint8Array;
  contentType: string;
  etag: string | null;
  version: number | null;
  checksum: string | null;
  refId: string | null;
  compressed: boolean | null;
  location: string | null;
}
