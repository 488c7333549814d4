//! The synthetic block world: a deterministic (seeded) generator of regions, places (home
//! bases, beds, chests, villages, trading posts, ore veins, caves, portals), villagers with
//! trade offers, paths with distance/light/risk, and a bot's event history over several days,
//! together with the ground-truth answers to the seed questions.
//!
//! The generator writes only events (the log is the source of truth), so ingesting its output
//! exercises the same path as a real agent. Randomness comes from a local SplitMix64, so a seed
//! gives the same world on every platform and every version of every dependency.
//!
//! Scripted facts the ground truth rests on (everything else is random filler that never
//! contradicts them):
//! - home moved once: the first base's HOME edge gets `valid_to`; the second is home now;
//! - three fletchers offer an emerald for sticks: one traded with this morning, one seen on the
//!   first day, one known only from a rumour (confidence 0.3, below the 0.5 a trade needs);
//!   in a world of many regions the one seen on the first day was seen so early that its
//!   offer has faded below 0.5 too (a week's half-life), and the ground truth says so;
//! - the night before last the bot died at an ore vein and dropped iron, torches and a diamond;
//! - last night it fought a skeleton at a cave, then slept in its bed.

use serde::{Deserialize, Serialize};

use crate::model::{
    kinds, labels, relations, Anchor, Assertion, EdgeUpsert, EventDraft, NodeUpsert, Props, Value,
};

/// Ticks in a day; night runs from [`NIGHT_START`] to the end of the day.
pub const DAY: i64 = 24_000;
pub const NIGHT_START: i64 = 13_000;
/// The bot's node key.
pub const BOT: &str = "bot";

/// SplitMix64: tiny, fast, and fixed forever (unlike a library's default generator).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Generator settings.
#[derive(Clone, Debug)]
pub struct WorldConfig {
    pub seed: u64,
    /// Size: 1 is the demo world (a few hundred facts); the number of regions grows linearly.
    pub scale: u32,
    /// Days of history (at least 4, for the scripted last nights).
    pub days: u32,
}

impl Default for WorldConfig {
    fn default() -> Self {
        WorldConfig {
            seed: 42,
            scale: 1,
            days: 6,
        }
    }
}

/// A trade the ground truth expects, best first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExpectedTrade {
    pub villager: String,
    pub place: String,
    pub last_seen: i64,
}

/// Ground truth for the seed questions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroundTruth {
    /// Where is home: the current home base.
    pub home: String,
    /// The home it replaced (its HOME edge has ended).
    pub former_home: String,
    /// Where to trade sticks for emeralds: offers believed with confidence >= 0.5 at the
    /// world's last moment (decayed since last seen), most recent first.
    pub sticks_for_emeralds: Vec<ExpectedTrade>,
    /// Villagers said to make that offer with too little confidence to count (a rumour, or
    /// an offer faded since it was seen).
    pub low_confidence_offers: Vec<String>,
    /// What happened last night: the window and the observation ids of its events, in order.
    pub last_night_from: i64,
    pub last_night_to: i64,
    pub last_night: Vec<String>,
    pub last_night_kinds: Vec<String>,
    /// Where did I last die and what did I drop.
    pub last_death_place: String,
    pub last_death_ts: i64,
    pub last_death_dropped: Vec<(String, i64)>,
    pub last_death_observation: String,
}

/// A generated world: its events in log order and the ground truth.
#[derive(Clone, Debug)]
pub struct World {
    pub events: Vec<EventDraft>,
    pub truth: GroundTruth,
}

const ITEMS: &[&str] = &[
    "emerald",
    "stick",
    "iron_ingot",
    "diamond",
    "bread",
    "wheat",
    "coal",
    "torch",
    "cobblestone",
    "string",
    "arrow",
    "wool",
    "book",
    "paper",
    "carrot",
    "leather",
];
const NAME_A: &[&str] = &[
    "Oak", "Birch", "Stone", "Mossy", "Amber", "Frost", "Sun", "Willow", "Iron", "Red",
];
const NAME_B: &[&str] = &[
    "ridge", "brook", "vale", "field", "hollow", "crest", "moor", "ford", "glen", "shore",
];
const MOBS: &[&str] = &["zombie", "skeleton", "spider", "creeper"];
const PROFESSIONS: &[&str] = &["farmer", "librarian", "toolsmith", "shepherd", "butcher"];

fn item_key(item: &str) -> String {
    format!("item:{item}")
}

struct Place {
    key: String,
    kind: &'static str,
    region: usize,
    anchor: Anchor,
}

struct Builder {
    rng: Rng,
    events: Vec<EventDraft>,
    obs: u64,
    places: Vec<Place>,
    /// Place key -> index in `places`.
    place_index: std::collections::HashMap<String, usize>,
    /// Places discovered so far per region, for path building.
    known: Vec<Vec<usize>>,
    /// How many places of each name were given it so far.
    names_given: std::collections::HashMap<String, usize>,
}

fn node(key: &str, label: &str, name: &str) -> NodeUpsert {
    NodeUpsert {
        key: key.into(),
        label: Some(label.into()),
        name: Some(name.into()),
        ..Default::default()
    }
}

fn edge(from: &str, rel: &str, to: &str, confidence: f32) -> EdgeUpsert {
    EdgeUpsert {
        from: from.into(),
        relation: rel.into(),
        to: to.into(),
        confidence: Some(confidence),
        ..Default::default()
    }
}

fn props(pairs: &[(&str, Value)]) -> Props {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

impl Builder {
    fn event(
        &mut self,
        ts: i64,
        kind: &str,
        place: Option<&str>,
        payload: Value,
    ) -> &mut EventDraft {
        self.obs += 1;
        let mut ev = EventDraft::new(ts, BOT, kind);
        ev.place = place.map(str::to_string);
        ev.anchor = place.and_then(|p| self.place_index.get(p).map(|i| self.places[*i].anchor));
        ev.payload = payload;
        ev.evidence = vec![format!("obs-{}", self.obs)];
        // Salience is left to the store's formula (survival, novelty, social value).
        self.events.push(ev);
        self.events.last_mut().unwrap_or_else(|| unreachable!())
    }

    /// A COMBAT event at `place`.
    fn combat(&mut self, ts: i64, place: &str, mob: &str, outcome: &str) {
        let payload = Value::Map(props(&[
            ("mob", Value::from(mob)),
            ("outcome", Value::from(outcome)),
        ]));
        self.event(ts, kinds::COMBAT, Some(place), payload);
    }

    /// A DEATH event at `place`: the bot's DIED_AT edge and a DROPPED edge per item left there.
    fn death(&mut self, ts: i64, place: &str, cause: &str, dropped: &[(&str, i64)]) {
        let items = dropped
            .iter()
            .map(|(i, c)| {
                Value::Map(props(&[
                    ("item", Value::from(*i)),
                    ("count", Value::Int(*c)),
                ]))
            })
            .collect();
        let payload = Value::Map(props(&[
            ("cause", Value::from(cause)),
            ("dropped", Value::List(items)),
        ]));
        let mut assertions = vec![Assertion::UpsertEdge(edge(
            BOT,
            relations::DIED_AT,
            place,
            1.0,
        ))];
        for (item, count) in dropped {
            let mut e = edge(place, relations::DROPPED, &item_key(item), 1.0);
            e.props = props(&[("count", Value::Int(*count))]);
            e.valid_from = Some(ts);
            assertions.push(Assertion::UpsertEdge(e));
        }
        self.event(ts, kinds::DEATH, Some(place), payload)
            .assertions = assertions;
    }

    /// A SLEEP event in `bed`, re-confirming the SLEPT_AT edge.
    fn sleep(&mut self, ts: i64, bed: &str, text: &str) {
        let ev = self.event(ts, kinds::SLEEP, Some(bed), Value::from(text));
        ev.assertions = vec![Assertion::UpsertEdge(edge(
            BOT,
            relations::SLEPT_AT,
            bed,
            1.0,
        ))];
    }

    /// A name for a place of `kind`, unlike every name given so far: a hundred names per
    /// kind, and a world of forty regions has more places of a kind than that, so a name
    /// drawn again is numbered ("Amberridge ore vein 2"). Two places of one name had made
    /// `loci check` report likely duplicates in loci's own world (helper-147). The number
    /// draws nothing from the generator, so a world without a repeat is what it was.
    fn place_name(&mut self, kind: &str) -> String {
        let a = *self.rng.pick(NAME_A);
        let b = *self.rng.pick(NAME_B);
        let kind = kind.replace('_', " ");
        let name = format!("{a}{b} {kind}");
        let given = self.names_given.entry(name.clone()).or_default();
        *given += 1;
        match *given {
            1 => name,
            n => format!("{name} {n}"),
        }
    }

    /// Creates a place (not yet discovered).
    fn add_place(&mut self, key: String, kind: &'static str, region: usize) -> usize {
        let (rx, rz) = ((region % 16) as i32 * 24, (region / 16) as i32 * 24);
        let cx = rx + self.rng.below(20) as i32;
        let cz = rz + self.rng.below(20) as i32;
        let y = match kind {
            "cave" | "ore_vein" => 12 + self.rng.below(30) as i32,
            _ => 62 + self.rng.below(8) as i32,
        };
        let anchor = Anchor {
            cx,
            cz,
            block: Some([
                cx * 16 + self.rng.below(16) as i32,
                y,
                cz * 16 + self.rng.below(16) as i32,
            ]),
        };
        self.place_index.insert(key.clone(), self.places.len());
        self.places.push(Place {
            key,
            kind,
            region,
            anchor,
        });
        self.places.len() - 1
    }

    fn distance(&self, a: usize, b: usize) -> f64 {
        let (pa, pb) = (self.places[a].anchor.block, self.places[b].anchor.block);
        match (pa, pb) {
            (Some(x), Some(y)) => {
                let d: f64 = (0..3).map(|i| ((x[i] - y[i]) as f64).powi(2)).sum();
                d.sqrt()
            }
            _ => 0.0,
        }
    }

    /// A DISCOVERY event for place `p`: the place, its region, paths to up to two known
    /// places nearby, and what is there (contents, villagers).
    fn discover(&mut self, ts: i64, p: usize, extra: Vec<Assertion>) {
        let (key, kind, region) = {
            let pl = &self.places[p];
            (pl.key.clone(), pl.kind, pl.region)
        };
        let name = self.place_name(kind);
        let mut up = node(&key, labels::PLACE, &name);
        up.anchor = Some(self.places[p].anchor);
        up.props = props(&[("type", Value::from(kind))]);
        let mut assertions = vec![
            Assertion::UpsertNode(up),
            Assertion::UpsertEdge(edge(
                &key,
                relations::LOCATED_IN,
                &format!("region:{region}"),
                1.0,
            )),
        ];
        let mut near: Vec<usize> = self.known[region].clone();
        near.sort_by(|a, b| self.distance(p, *a).total_cmp(&self.distance(p, *b)));
        let mut links: Vec<usize> = near.into_iter().take(2).collect();
        // The first place found in a region is reached by a road from the nearest known place
        // of the previous region, so the regions form one connected map.
        if self.known[region].is_empty() && region > 0 {
            if let Some(&q) = self.known[region - 1]
                .iter()
                .min_by(|a, b| self.distance(p, **a).total_cmp(&self.distance(p, **b)))
            {
                links.push(q);
            }
        }
        for &q in links.iter() {
            let dark = matches!(kind, "cave" | "ore_vein")
                || matches!(self.places[q].kind, "cave" | "ore_vein");
            let light = if dark {
                self.rng.below(5) as i64
            } else {
                8 + self.rng.below(8) as i64
            };
            let risk = if dark {
                0.5 + self.rng.unit() * 0.5
            } else {
                self.rng.unit() * 0.3
            };
            let mut e = edge(&key, relations::PATH, &self.places[q].key.clone(), 1.0);
            e.props = props(&[
                (
                    "distance",
                    Value::Float((self.distance(p, q) * 10.0).round() / 10.0),
                ),
                ("light", Value::Int(light)),
                ("risk", Value::Float((risk * 100.0).round() / 100.0)),
            ]);
            assertions.push(Assertion::UpsertEdge(e));
        }
        assertions.extend(extra);
        self.known[region].push(p);
        let payload = Value::Map(props(&[
            ("found", Value::from(kind)),
            ("name", Value::from(name.as_str())),
        ]));
        let ev = self.event(ts, kinds::DISCOVERY, None, payload);
        ev.assertions = assertions;
        // The place exists once the event's assertions apply, so the event may name it.
        ev.place = Some(key);
    }
}

fn offer(
    villager: &str,
    give: &str,
    give_count: i64,
    want: &str,
    want_count: i64,
    conf: f32,
) -> Assertion {
    let mut e = edge(villager, relations::OFFERS, &item_key(give), conf);
    e.props = props(&[
        ("give", Value::from(give)),
        ("give_count", Value::Int(give_count)),
        ("want", Value::from(want)),
        ("want_count", Value::Int(want_count)),
    ]);
    Assertion::UpsertEdge(e)
}

/// The keys of the places the script uses: the script's events and the ground truth name them.
const SPAWN_BED: &str = "bed:spawn";
const FIRST_HOME: &str = "base:first";
const SECOND_HOME: &str = "base:second";
const SECOND_BED: &str = "bed:second";
const DEATH_VEIN: &str = "vein:deep";
const FIGHT_CAVE: &str = "cave:last_night";

/// The places the script uses (by index in `Builder::places`), found on the days it says.
struct ScriptedPlaces {
    spawn_bed: usize,
    first_home: usize,
    second_home: usize,
    second_bed: usize,
    death_vein: usize,
    fight_cave: usize,
}

/// The fletchers of the scripted emerald-for-sticks offers, and where each trades.
const FLETCHER_POSTS: [(&str, &str); 3] = [
    ("npc:fletcher:0", "trading_post:0:0"),
    ("npc:fletcher:1", "village:1:0"),
    ("npc:fletcher:rumour", "village:0:0"),
];

/// The villagers made so far, and those a midday trade may be with (villager, place).
#[derive(Default)]
struct Villagers {
    made: usize,
    trade_partners: Vec<(String, String)>,
}

/// Generates the world for `config`: the bot wakes knowing its world, the places are laid
/// out, then each day's mornings discover places, a midday trades, and a night ends in bed,
/// in a fight or in a death; the last morning trades with the fletcher. The script's events
/// give the ground truth.
pub fn generate(config: &WorldConfig) -> World {
    let days = config.days.max(4) as i64;
    let regions = 2 + config.scale as usize;
    let mut b = Builder {
        rng: Rng::new(config.seed),
        events: Vec::new(),
        obs: 0,
        places: Vec::new(),
        place_index: Default::default(),
        known: vec![Vec::new(); regions],
        names_given: Default::default(),
    };
    b.wake_at_spawn(regions);
    let (scripted, filler) = b.lay_out_places(regions);
    b.make_first_home(&scripted);
    // The filler places are discovered over the days' mornings.
    let per_day = filler.len().div_ceil(days as usize);
    let mut villagers = Villagers::default();
    for day in 0..days {
        let todays: Vec<usize> = filler
            .iter()
            .skip(day as usize * per_day)
            .take(per_day)
            .copied()
            .collect();
        b.discover_in_the_morning(day, &todays, per_day, &mut villagers);
        if !villagers.trade_partners.is_empty() && day > 0 {
            b.trade_at_midday(day, &villagers.trade_partners);
        }
        if day == days / 2 {
            b.move_house(day * DAY, &scripted);
        }
        b.spend_the_night(day, days, &scripted);
    }
    b.trade_with_the_fletcher(days * DAY);
    let truth = ground_truth(&b.events, days);
    World {
        events: b.events,
        truth,
    }
}

impl Builder {
    /// Day 0, dawn: the bot wakes at spawn, knowing its kind of world (itself, the items, the
    /// `regions` regions).
    fn wake_at_spawn(&mut self, regions: usize) {
        let mut genesis = Vec::new();
        let mut bot = node(BOT, labels::BOT, "Steve-bot");
        bot.pinned = Some(true);
        genesis.push(Assertion::UpsertNode(bot));
        for item in ITEMS {
            genesis.push(Assertion::UpsertNode(node(
                &item_key(item),
                labels::ITEM,
                &item.replace('_', " "),
            )));
        }
        for r in 0..regions {
            let name = format!("{}{} region", self.rng.pick(NAME_A), self.rng.pick(NAME_B));
            genesis.push(Assertion::UpsertNode(node(
                &format!("region:{r}"),
                labels::REGION,
                &name,
            )));
        }
        let ev = self.event(
            0,
            kinds::OBSERVATION,
            None,
            Value::from("woke up at the world spawn"),
        );
        ev.assertions = genesis;
    }

    /// The places of each region, not yet discovered: region 0's and 1's scripted ones, then
    /// every region's villages, trading post, chests, ore veins, cave (and a portal in every
    /// other region), the filler the days discover.
    fn lay_out_places(&mut self, regions: usize) -> (ScriptedPlaces, Vec<usize>) {
        let scripted = ScriptedPlaces {
            spawn_bed: self.add_place(SPAWN_BED.into(), "bed", 0),
            first_home: self.add_place(FIRST_HOME.into(), "base", 0),
            second_home: self.add_place(SECOND_HOME.into(), "base", 1),
            second_bed: self.add_place(SECOND_BED.into(), "bed", 1),
            death_vein: self.add_place(DEATH_VEIN.into(), "ore_vein", 0),
            fight_cave: self.add_place(FIGHT_CAVE.into(), "cave", 1),
        };
        let mut filler = Vec::new();
        for r in 0..regions {
            for (kind, n) in [
                ("village", 1),
                ("trading_post", 1),
                ("chest", 3),
                ("ore_vein", 2),
                ("cave", 1),
            ] {
                for i in 0..n {
                    filler.push(self.add_place(format!("{kind}:{r}:{i}"), kind, r));
                }
            }
            if r % 2 == 1 {
                filler.push(self.add_place(format!("portal:{r}"), "portal", r));
            }
        }
        (scripted, filler)
    }

    /// Day 0: the spawn bed is found, then the first home, built and chosen as home.
    fn make_first_home(&mut self, scripted: &ScriptedPlaces) {
        self.discover(100, scripted.spawn_bed, vec![]);
        let home = || {
            vec![Assertion::UpsertEdge(edge(
                BOT,
                relations::HOME,
                FIRST_HOME,
                1.0,
            ))]
        };
        self.discover(400, scripted.first_home, home());
        let ev = self.event(
            500,
            kinds::BUILD,
            Some(FIRST_HOME),
            Value::from("built a shelter and chose it as home"),
        );
        ev.assertions = home();
    }

    /// The morning of `day`: the places `todays` are discovered, `per_day` a day spread over
    /// it, with what is in each (a chest's contents, a village's or a trading post's
    /// villagers and their offers). Village 0:0 is followed by the hearsay of a fletcher.
    fn discover_in_the_morning(
        &mut self,
        day: i64,
        todays: &[usize],
        per_day: usize,
        villagers: &mut Villagers,
    ) {
        let base_ts = day * DAY;
        for (i, &p) in todays.iter().enumerate() {
            let ts = base_ts + 1000 + i as i64 * (8000 / per_day.max(1) as i64);
            let kind = self.places[p].kind;
            let key = self.places[p].key.clone();
            let extra = match kind {
                "chest" => self.chest_contents(&key),
                "village" | "trading_post" => self.villagers_at(&key, kind, villagers),
                _ => Vec::new(),
            };
            self.discover(ts, p, extra);
            if key == "village:0:0" {
                self.hear_of_a_fletcher(ts + 50, &key);
            }
        }
    }

    /// Three stacks of random items in the chest `key`.
    fn chest_contents(&mut self, key: &str) -> Vec<Assertion> {
        (0..3)
            .map(|_| {
                let item = *self.rng.pick(ITEMS);
                let mut e = edge(key, relations::CONTAINS, &item_key(item), 1.0);
                e.props = props(&[("count", Value::Int(1 + self.rng.below(32) as i64))]);
                Assertion::UpsertEdge(e)
            })
            .collect()
    }

    /// The villagers of the village or trading post `key` (three or two), each with two
    /// random offers (a fifth of them later a midday trade's partner), and a scripted
    /// fletcher trading there.
    fn villagers_at(&mut self, key: &str, kind: &str, villagers: &mut Villagers) -> Vec<Assertion> {
        let mut extra = Vec::new();
        let n = if kind == "village" { 3 } else { 2 };
        for _ in 0..n {
            villagers.made += 1;
            let v = format!("npc:villager:{}", villagers.made);
            let prof = *self.rng.pick(PROFESSIONS);
            let mut up = node(&v, labels::NPC, &format!("{prof} villager"));
            up.props = props(&[("profession", Value::from(prof))]);
            extra.push(Assertion::UpsertNode(up));
            extra.push(Assertion::UpsertEdge(edge(
                &v,
                relations::LOCATED_IN,
                key,
                1.0,
            )));
            for _ in 0..2 {
                // Random offers never sell emeralds for sticks: that trade is scripted.
                let (give, want) = loop {
                    let g = *self.rng.pick(ITEMS);
                    let w = *self.rng.pick(ITEMS);
                    if g != w && !(g == "emerald" && w == "stick") {
                        break (g, w);
                    }
                };
                // Whole hundredths, computed in integers: 0.6 + 0.33 in f32 is 0.93000007,
                // which every reader of a confidence would then see.
                let conf = (60 + self.rng.below(40)) as f32 / 100.0;
                extra.push(offer(
                    &v,
                    give,
                    1 + self.rng.below(3) as i64,
                    want,
                    1 + self.rng.below(20) as i64,
                    conf,
                ));
                if self.rng.chance(0.2) {
                    villagers.trade_partners.push((v.clone(), key.to_string()));
                }
            }
        }
        for (f, post) in FLETCHER_POSTS {
            if post == key && !f.ends_with("rumour") {
                let mut up = node(f, labels::NPC, "fletcher villager");
                up.props = props(&[("profession", Value::from("fletcher"))]);
                extra.push(Assertion::UpsertNode(up));
                extra.push(Assertion::UpsertEdge(edge(
                    f,
                    relations::LOCATED_IN,
                    key,
                    1.0,
                )));
                extra.push(offer(f, "emerald", 1, "stick", 32, 0.9));
            }
        }
        extra
    }

    /// Hearsay at the village `key`: someone says a fletcher here pays emeralds for sticks.
    /// Weak belief.
    fn hear_of_a_fletcher(&mut self, ts: i64, key: &str) {
        let mut up = node(
            "npc:fletcher:rumour",
            labels::NPC,
            "fletcher villager (rumoured)",
        );
        up.props = props(&[("profession", Value::from("fletcher"))]);
        let ev = self.event(
            ts,
            kinds::OBSERVATION,
            Some(key),
            Value::from("a player in chat said a fletcher here pays an emerald for sticks"),
        );
        ev.assertions = vec![
            Assertion::UpsertNode(up),
            Assertion::UpsertEdge(edge("npc:fletcher:rumour", relations::LOCATED_IN, key, 0.3)),
            offer("npc:fletcher:rumour", "emerald", 1, "stick", 20, 0.3),
        ];
    }

    /// Midday of `day`: an ordinary trade with one of `partners` (re-confirms where the
    /// villager is).
    fn trade_at_midday(&mut self, day: i64, partners: &[(String, String)]) {
        let (v, place) = self.rng.pick(partners).clone();
        let ev = self.event(
            day * DAY + 9500,
            kinds::TRADE,
            Some(&place),
            Value::Map(props(&[("with", Value::from(v.as_str()))])),
        );
        ev.assertions = vec![Assertion::UpsertEdge(EdgeUpsert {
            from: v,
            relation: relations::LOCATED_IN.into(),
            to: place,
            confidence: Some(1.0),
            ..Default::default()
        })];
    }

    /// The day that begins at `base_ts`: the bot finds the second base and its bed and moves
    /// in; the first home's validity ends as the second's begins.
    fn move_house(&mut self, base_ts: i64, scripted: &ScriptedPlaces) {
        self.discover(base_ts + 10_000, scripted.second_home, vec![]);
        self.discover(base_ts + 10_200, scripted.second_bed, vec![]);
        let ev = self.event(
            base_ts + 10_500,
            kinds::BUILD,
            Some(SECOND_HOME),
            Value::from("moved into a bigger base by the river"),
        );
        let mut old = edge(BOT, relations::HOME, FIRST_HOME, 1.0);
        old.valid_to = Some(base_ts + 10_500);
        let mut new = edge(BOT, relations::HOME, SECOND_HOME, 1.0);
        new.valid_from = Some(base_ts + 10_500);
        ev.assertions = vec![Assertion::UpsertEdge(old), Assertion::UpsertEdge(new)];
    }

    /// The night of `day` of `days`: the night before last, the scripted death at the deep
    /// vein; the last night, a won fight at a cave, then bed; before them, now and then a
    /// death somewhere known, else sleep in the bed of the home of the time.
    fn spend_the_night(&mut self, day: i64, days: i64, scripted: &ScriptedPlaces) {
        let night = day * DAY + NIGHT_START;
        let bed = if day >= days / 2 {
            SECOND_BED
        } else {
            SPAWN_BED
        };
        if day == days - 2 {
            self.discover(night - 2000, scripted.death_vein, vec![]);
            self.combat(night + 1200, DEATH_VEIN, "creeper", "lost");
            self.death(
                night + 1300,
                DEATH_VEIN,
                "blown up by a creeper",
                &[("iron_ingot", 5), ("torch", 12), ("diamond", 1)],
            );
        } else if day == days - 1 {
            self.discover(night - 1500, scripted.fight_cave, vec![]);
            self.combat(night + 800, FIGHT_CAVE, "skeleton", "won");
            self.sleep(night + 2500, bed, "slept through the rest of the night");
        } else if day < days - 2 && self.rng.chance(0.3) {
            // A random earlier death somewhere already known, dropping a few things.
            let p = self.known[self.rng.below(self.known.len() as u64) as usize].clone();
            if let Some(&p) = p.first() {
                let key = self.places[p].key.clone();
                let mob = *self.rng.pick(MOBS);
                self.combat(night + 600, &key, mob, "lost");
                let item = *self.rng.pick(ITEMS);
                let count = 1 + self.rng.below(16) as i64;
                self.death(
                    night + 700,
                    &key,
                    &format!("killed by a {mob}"),
                    &[(item, count)],
                );
            }
        } else {
            self.sleep(night + 500, bed, "slept until morning");
        }
    }

    /// The last morning (the day that begins at `end`): sticks traded for an emerald with
    /// the first fletcher.
    fn trade_with_the_fletcher(&mut self, end: i64) {
        let ev = self.event(
            end + 2000,
            kinds::TRADE,
            Some("trading_post:0:0"),
            Value::Map(props(&[
                ("with", Value::from("npc:fletcher:0")),
                ("gave", Value::from("32 stick")),
                ("got", Value::from("1 emerald")),
            ])),
        );
        ev.assertions = vec![offer("npc:fletcher:0", "emerald", 1, "stick", 32, 0.95)];
    }
}

/// The answers a memory of `events` (a world of `days` days) should give, from what was
/// scripted.
fn ground_truth(events: &[EventDraft], days: i64) -> GroundTruth {
    let last_night_from = (days - 1) * DAY + NIGHT_START;
    let last_night_to = days * DAY;
    let window: Vec<&EventDraft> = events
        .iter()
        .filter(|e| e.ts >= last_night_from && e.ts < last_night_to)
        .collect();
    // A fletcher's offer as last seen: when, and with what confidence.
    let fletcher_seen = |f: &str| {
        (events.iter())
            .flat_map(|e| e.assertions.iter().map(move |a| (e.ts, a)))
            .filter_map(|(ts, a)| match a {
                Assertion::UpsertEdge(x) if x.from == f && x.relation == relations::OFFERS => {
                    Some((ts, x.confidence.unwrap_or(1.0)))
                }
                _ => None,
            })
            .max_by_key(|&(ts, _)| ts)
            .unwrap_or((0, 0.0))
    };
    // An offer counts when believed at the world's last moment: decayed since it was last
    // seen, as the store's default policy decays it (a week's half-life). In a world of
    // many regions the second fletcher is found so early that its offer has faded below 0.5.
    let now = events.iter().map(|e| e.ts).max().unwrap_or(0);
    let decay = crate::dynamics::decay::DecayPolicy::default();
    let (mut believed, mut doubted) = (Vec::new(), Vec::new());
    for (villager, place) in FLETCHER_POSTS {
        let (last_seen, confidence) = fletcher_seen(villager);
        if decay.effective(relations::OFFERS, confidence, last_seen, now) >= 0.5 {
            believed.push(ExpectedTrade {
                villager: villager.into(),
                place: place.into(),
                last_seen,
            });
        } else {
            doubted.push(villager.to_string());
        }
    }
    // Most recently seen first, as `queries::find_trade` ranks them.
    believed.sort_by_key(|t| std::cmp::Reverse(t.last_seen));
    GroundTruth {
        home: SECOND_HOME.into(),
        former_home: FIRST_HOME.into(),
        sticks_for_emeralds: believed,
        low_confidence_offers: doubted,
        last_night_from,
        last_night_to,
        last_night: window.iter().map(|e| e.evidence[0].clone()).collect(),
        last_night_kinds: window.iter().map(|e| e.kind.clone()).collect(),
        last_death_place: DEATH_VEIN.into(),
        last_death_ts: (days - 2) * DAY + NIGHT_START + 1300,
        last_death_dropped: vec![
            ("iron_ingot".into(), 5),
            ("torch".into(), 12),
            ("diamond".into(), 1),
        ],
        last_death_observation: events
            .iter()
            .rfind(|e| e.kind == kinds::DEATH)
            .map(|e| e.evidence[0].clone())
            .unwrap_or_default(),
    }
}

/// A world seen only through sightings (see `dynamics::places`), with what should emerge.
#[derive(Clone, Debug)]
pub struct SightingWorld {
    /// `SIGHTING` events (and a few interactions), in time order.
    pub events: Vec<EventDraft>,
    /// True village centres `[x, z]`.
    pub villages: Vec<[i32; 2]>,
    /// Objects seen twice, or once and used: they must become places. `(object, block)`.
    pub places: Vec<(String, [i32; 3])>,
    /// Objects seen once and never used: they must not.
    pub glimpses: Vec<(String, [i32; 3])>,
}

/// Villages of 3 to 5 beds and 1 to 3 workstations within 12 blocks of their centres, centres
/// at least 300 blocks apart; lone chests and ores between them; every object sighted twice,
/// or once and then slept in (a bed), and a few things glimpsed only once.
pub fn sighting_world(seed: u64, villages: usize) -> SightingWorld {
    let mut rng = Rng::new(seed ^ 0x5157);
    let mut out = SightingWorld {
        events: Vec::new(),
        villages: Vec::new(),
        places: Vec::new(),
        glimpses: Vec::new(),
    };
    let mut objects: Vec<(String, [i32; 3])> = Vec::new();
    for v in 0..villages {
        let centre = [
            v as i32 * 400 + rng.below(60) as i32,
            rng.below(400) as i32 - 200,
        ];
        out.villages.push(centre);
        let near = |rng: &mut Rng| {
            [
                centre[0] + rng.below(17) as i32 - 8,
                64,
                centre[1] + rng.below(17) as i32 - 8,
            ]
        };
        for _ in 0..3 + rng.below(3) {
            objects.push(("bed".into(), near(&mut rng)));
        }
        for _ in 0..1 + rng.below(3) {
            objects.push(("workstation".into(), near(&mut rng)));
        }
        // Between villages: a chest and an ore, far from any bed.
        objects.push(("chest".into(), [centre[0] + 200, 64, centre[1]]));
        objects.push(("ore".into(), [centre[0] + 200, 20, centre[1] + 60]));
    }
    objects.sort();
    objects.dedup_by(|a, b| a.1 == b.1);
    let mut ts = 0;
    let sight = |ts: i64, object: &str, block: [i32; 3], events: &mut Vec<EventDraft>| {
        let mut e = EventDraft::new(ts, BOT, crate::dynamics::places::SIGHTING);
        let mut m = std::collections::BTreeMap::new();
        m.insert("object".to_string(), Value::from(object));
        e.payload = Value::Map(m);
        e.anchor = Some(Anchor {
            cx: block[0].div_euclid(16),
            cz: block[2].div_euclid(16),
            block: Some(block),
        });
        events.push(e);
    };
    for (object, block) in &objects {
        ts += 50;
        sight(ts, object, *block, &mut out.events);
        if object == "bed" && rng.chance(0.3) {
            // Slept in it instead of seeing it again.
            ts += 50;
            let mut e = EventDraft::new(ts, BOT, kinds::SLEEP);
            e.anchor = Some(Anchor {
                cx: block[0].div_euclid(16),
                cz: block[2].div_euclid(16),
                block: Some(*block),
            });
            out.events.push(e);
        } else {
            ts += 50;
            sight(ts, object, *block, &mut out.events);
        }
        out.places.push((object.clone(), *block));
    }
    for i in 0..villages.max(1) * 2 {
        let block = [i as i32 * 173 + 90, 70, 500 + rng.below(100) as i32];
        ts += 50;
        sight(ts, "chest", block, &mut out.events);
        out.glimpses.push(("chest".into(), block));
    }
    out
}
